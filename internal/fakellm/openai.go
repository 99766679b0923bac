package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type oToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oToolCall     `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oRequest struct {
	Model    string     `json:"model"`
	Messages []oMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// contentText renders OpenAI content: a string, null, or text parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// decodeOpenAI parses and validates a Chat Completions request.
func decodeOpenAI(body []byte) (Request, bool, error) {
	var or oRequest
	if err := json.Unmarshal(body, &or); err != nil {
		return Request{}, false, fmt.Errorf("invalid JSON body: %v", err)
	}
	req := Request{Dialect: OpenAI, Model: or.Model, Stream: or.Stream, Body: body}
	includeUsage := or.StreamOptions != nil && or.StreamOptions.IncludeUsage
	if or.Model == "" {
		return req, false, fmt.Errorf("you must provide a model parameter")
	}
	for _, t := range or.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return req, false, fmt.Errorf("tools: each tool needs type function and a function name")
		}
		req.Tools = append(req.Tools, t.Function.Name)
	}
	if rf := or.ResponseFormat; rf != nil && rf.Type == "json_schema" {
		if rf.JSONSchema == nil || rf.JSONSchema.Name == "" || len(rf.JSONSchema.Schema) == 0 {
			return req, false, fmt.Errorf("response_format.json_schema: name and schema are required")
		}
		req.HasOutputSchema = true
	}
	if len(or.Messages) == 0 {
		return req, false, fmt.Errorf("messages: must contain at least one message")
	}
	pending := map[string]bool{}
	var lastResults []string
	for i, m := range or.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			return req, false, fmt.Errorf("messages[%d]: %v", i, err)
		}
		if m.Role != "tool" && len(pending) > 0 {
			return req, false, fmt.Errorf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'", i)
		}
		switch m.Role {
		case "system", "developer":
			req.System += text
			continue
		case "user":
			req.LastUserText = text
			lastResults = nil
		case "assistant":
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Function.Name == "" {
					return req, false, fmt.Errorf("messages[%d].tool_calls: id and function.name are required", i)
				}
				if !json.Valid([]byte(tc.Function.Arguments)) {
					return req, false, fmt.Errorf("messages[%d].tool_calls: function.arguments must be a JSON string", i)
				}
				pending[tc.ID] = true
			}
			lastResults = nil
		case "tool":
			if !pending[m.ToolCallID] {
				return req, false, fmt.Errorf("messages[%d]: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
			req.ToolResults++
			lastResults = append(lastResults, text)
		default:
			return req, false, fmt.Errorf("messages[%d].role: unknown role %q", i, m.Role)
		}
		req.Messages++
	}
	if len(pending) > 0 {
		return req, false, fmt.Errorf("an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'")
	}
	req.LastToolResults = lastResults
	return req, includeUsage, nil
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		s.fail(w, r, body, Request{}, http.StatusNotFound, "", "unknown_url", fmt.Sprintf("Unknown request URL: %s %s", r.Method, r.URL.Path))
		return
	}
	if s.opts.APIKey != "" && bearer(r) != s.opts.APIKey {
		s.fail(w, r, body, Request{}, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided")
		return
	}
	req, includeUsage, err := decodeOpenAI(body)
	if err != nil {
		s.fail(w, r, body, req, http.StatusBadRequest, "", "", err.Error())
		return
	}
	cu, commit := s.cache.openAI(body)
	if win := s.opts.ContextWindow; win > 0 && cu.Total > win {
		s.fail(w, r, body, req, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded",
			fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", win, cu.Total))
		return
	}
	s.answer(w, r, body, req, func(rp Reply) {
		commit()
		writeOpenAIReply(r, w, s, req, rp, cu, includeUsage)
	})
}

func writeOpenAIReply(r *http.Request, w http.ResponseWriter, s *Server, req Request, rp Reply, cu cacheUsage, includeUsage bool) {
	text := rp.replyText()
	usage := openAIUsage(rp, cu, text)
	type call struct{ id, name, args string }
	var calls []call
	for _, c := range rp.ToolCalls {
		id := c.ID
		if id == "" {
			id = s.nextID("call_")
		}
		calls = append(calls, call{id, c.Name, string(inputOrEmpty(c.Input))})
	}
	finish := rp.StopReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	id := s.nextID("chatcmpl-")
	created := time.Now().Unix()
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		if text != "" {
			msg["content"] = text
		}
		if len(calls) > 0 {
			var tcs []map[string]any
			for _, c := range calls {
				tcs = append(tcs, map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args}})
			}
			msg["tool_calls"] = tcs
		}
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   usage}, rp.Fault)
		return
	}
	e := startSSE(r, w, OpenAI, rp)
	chunk := func(delta map[string]any, fin any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin, "logprobs": nil}}}
	}
	var chunks []map[string]any
	chunks = append(chunks, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if text != "" {
		for _, frag := range splitText(text, rp.ChunkSize) {
			chunks = append(chunks, chunk(map[string]any{"content": frag}, nil))
		}
	}
	for i, c := range calls {
		chunks = append(chunks, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function",
			"function": map[string]string{"name": c.name, "arguments": ""}}}}, nil))
		for _, frag := range splitHalf(c.args) {
			chunks = append(chunks, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]string{"arguments": frag}}}}, nil))
		}
	}
	chunks = append(chunks, chunk(map[string]any{}, finish))
	if includeUsage {
		chunks = append(chunks, map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usage})
	}
	for _, c := range chunks {
		if e.event("", c) != nil {
			return
		}
	}
	if e.fault != nil && e.fault.CutAfter > 0 && e.n >= e.fault.CutAfter {
		e.f.Flush()
		panic(http.ErrAbortHandler)
	}
	if e.fault != nil && e.fault.StallAfter > 0 && e.n >= e.fault.StallAfter {
		// After the usage chunk, before the stream's end.
		e.f.Flush()
		<-e.ctx.Done()
		return
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	e.f.Flush()
}

// openAIUsage is the usage object of a reply: the tokens it gives, or
// the cache's counts and an estimate of the output.
func openAIUsage(rp Reply, cu cacheUsage, text string) map[string]any {
	u := rp.Usage
	if u.InputTokens == 0 && u.CacheReadTokens == 0 && u.CacheWriteTokens == 0 {
		u.InputTokens, u.CacheReadTokens = cu.Uncached(), cu.Read
	}
	if u.OutputTokens == 0 {
		n := len(text)
		for _, c := range rp.ToolCalls {
			n += len(c.Name) + len(c.Input)
		}
		u.OutputTokens = estimate(n)
	}
	// prompt_tokens includes the cached tokens and, on models that bill
	// cache writes, the tokens written.
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	details := map[string]int64{"cached_tokens": u.CacheReadTokens}
	if u.CacheWriteTokens > 0 {
		details["cache_write_tokens"] = u.CacheWriteTokens
	}
	return map[string]any{"prompt_tokens": prompt, "completion_tokens": u.OutputTokens,
		"total_tokens": prompt + u.OutputTokens, "prompt_tokens_details": details}
}
