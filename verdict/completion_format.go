package verdict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verify"
)

// FormatResult says whether the model's output has the step's expected
// format and, when it does not, what is wrong with it.
type FormatResult struct {
	Valid bool `json:"valid"`
	// Error says what is wrong with the format when not Valid.
	Error string `json:"error,omitempty"`
	// Extracted is the decoded structured output (also when invalid, if
	// it could be decoded at all).
	Extracted any `json:"extracted,omitempty"`
	// Recovered is true when the JSON came from the response text rather
	// than from the provider's structured output.
	Recovered bool `json:"recovered,omitempty"`
}

// FormatConfig configures a FormatValidator.
type FormatConfig struct {
	// Extract recovers JSON text from prose (schema.ExtractJSON has this
	// signature); nil means prose never passes.
	Extract func(text string) (json.RawMessage, bool)
	// Problems, when set, lists the problems inside a schema validation
	// error one per line (schema.Problems); otherwise the error's text is
	// used.
	Problems func(err error) []string
}

// FormatValidator checks that the model's output has the step's expected
// format (its outputSchemaRef), separately from CompletionValidator, which
// checks the world. It has no side effects.
type FormatValidator struct {
	cfg FormatConfig
}

// NewFormatValidator returns a FormatValidator.
func NewFormatValidator(cfg FormatConfig) *FormatValidator {
	return &FormatValidator{cfg: cfg}
}

// Validate checks s's structured output against schema. When the provider
// returned no structured output, the JSON is recovered from the last
// assistant response with the configured extractor.
func (f *FormatValidator) Validate(s *event.IterationSummary, schema verify.SchemaValidator) FormatResult {
	if s == nil {
		return FormatResult{Error: "no iteration summary"}
	}
	var (
		v         any
		recovered bool
	)
	if len(bytes.TrimSpace(s.StructuredOutput)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(s.StructuredOutput))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return FormatResult{Error: "structured output is not valid JSON: " + err.Error()}
		}
	} else {
		if f.cfg.Extract == nil {
			return FormatResult{Error: "the response has no structured output"}
		}
		text := ""
		if n := len(s.AssistantResponses); n > 0 {
			text = s.AssistantResponses[n-1]
		}
		raw, ok := f.cfg.Extract(text)
		if !ok {
			return FormatResult{Error: "the response has no structured output and no JSON could be recovered from its text"}
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return FormatResult{Error: "the JSON recovered from the response is not valid: " + err.Error()}
		}
		recovered = true
	}
	if schema == nil {
		return FormatResult{Valid: true, Extracted: v, Recovered: recovered}
	}
	if err := schema.Validate(v); err != nil {
		msg := err.Error()
		if f.cfg.Problems != nil {
			if p := f.cfg.Problems(err); len(p) > 0 {
				msg = strings.Join(p, "\n")
			}
		}
		return FormatResult{Error: msg, Extracted: v, Recovered: recovered}
	}
	return FormatResult{Valid: true, Extracted: v, Recovered: recovered}
}

// FormatRetryPrompt is the prompt sent after an invalid format: it quotes
// the schema problems and, when given, the schema itself.
func FormatRetryPrompt(r FormatResult, schema json.RawMessage) string {
	var b strings.Builder
	b.WriteString("## Your last answer did not have the required format\n\n")
	b.WriteString("Problems:\n\n```\n")
	b.WriteString(strings.TrimSpace(r.Error))
	b.WriteString("\n```\n\n")
	if len(schema) > 0 {
		var pretty bytes.Buffer
		if json.Indent(&pretty, schema, "", "  ") != nil {
			pretty.Reset()
			pretty.Write(schema)
		}
		b.WriteString("Answer again with one JSON object that matches this schema:\n\n```json\n")
		b.WriteString(pretty.String())
		b.WriteString("\n```\n")
	} else {
		b.WriteString("Answer again with one JSON object that matches the step's output schema.\n")
	}
	b.WriteString("Return only the JSON object, no prose around it.\n")
	return b.String()
}

// FormatDeclaration renders what the model reported and declared in s's
// structured output ("**Reported Status**: …" and "**Declared Next
// Action**: … (reason)" lines), or "" when it declared nothing. It is the
// decision part of FormatIterationSummary, which a retry prompt carries on
// its own.
func FormatDeclaration(s *event.IterationSummary) string {
	if s == nil {
		return ""
	}
	d := DetectDeclaration(s.StructuredOutput, nil, "", DeclarationFields{})
	var b strings.Builder
	if d.Status != "" {
		fmt.Fprintf(&b, "**Reported Status**: %s\n", d.Status)
	}
	if d.NextAction != "" {
		fmt.Fprintf(&b, "**Declared Next Action**: %s", d.NextAction)
		if d.NextActionReason != "" {
			fmt.Fprintf(&b, " (%s)", d.NextActionReason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// FormatIterationSummary renders the summary of the previous iteration for
// the next prompt: the model's reported status and declared
// next action (so it sees its own declaration), then what was done.
func FormatIterationSummary(s *event.IterationSummary) string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Previous Iteration Summary (Iteration %d)\n", s.Iteration)
	if decision := FormatDeclaration(s); decision != "" {
		b.WriteString("\n### Previous Iteration Decision\n")
		b.WriteString(decision)
	}
	b.WriteString("\n### What was done:\n")
	wrote := false
	if summary := structuredSummary(s.StructuredOutput); summary != "" {
		fmt.Fprintf(&b, "%s\n", summary)
		wrote = true
	}
	if len(s.ToolsUsed) > 0 {
		var tools []string
		for _, t := range s.ToolsUsed {
			item := t.Name
			if t.IsError || t.Denied {
				item += " (failed)"
			}
			tools = append(tools, item)
		}
		fmt.Fprintf(&b, "- Tools used: %s\n", strings.Join(tools, ", "))
		wrote = true
	}
	if text := strings.TrimSpace(s.Text()); text != "" {
		fmt.Fprintf(&b, "- Last response: %s\n", clipFormatted(text, 600))
		wrote = true
	}
	for _, e := range s.Errors {
		fmt.Fprintf(&b, "- Error: %s\n", clipFormatted(e, 300))
		wrote = true
	}
	if !wrote {
		b.WriteString("- nothing recorded\n")
	}
	return b.String()
}

// structuredSummary returns the structured output's "summary" string, if any.
func structuredSummary(raw json.RawMessage) string {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return ""
	}
	if s, ok := m["summary"].(string); ok {
		return "- " + clipFormatted(strings.TrimSpace(s), 600)
	}
	return ""
}

// clip shortens s to about n bytes on a rune boundary, collapsing newlines.
func clipFormatted(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
