package llm

import "github.com/capstan-dev/capstan/tool"

// BytesPerToken is the average prompt bytes per token capstan assumes when
// it must estimate a token count before sending (English text and JSON
// with the Claude and GPT tokenizers come to about four bytes a token).
const BytesPerToken = 4

// EstimateTokens estimates the tokens of n prompt bytes.
func EstimateTokens(n int) int64 { return int64((n + BytesPerToken - 1) / BytesPerToken) }

// SpecSize is the number of bytes a tool definition puts into a request.
func SpecSize(s tool.Spec) int { return len(s.Name) + len(s.Description) + len(s.InputSchema) }

// RequestSize is the number of bytes req puts into the model's input:
// system prompt, tool definitions, output schema and transcript.
func RequestSize(req *Request) int {
	return fixedRequestSize(req) + messagesBytes(req.Messages)
}

// fixedRequestSize is the part of RequestSize that does not grow with the
// transcript: system prompt, tool definitions and output schema.
func fixedRequestSize(req *Request) int {
	n := len(req.System) + len(req.OutputSchema)
	for _, t := range req.Tools {
		n += SpecSize(t)
	}
	return n
}
