package event

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/capstan-dev/capstan/journal"
)

// The large payloads of every iteration — model.turn, session.messages,
// query.result, completion.check, retry.prompt, step.state, iteration.end —
// and the model layer's other events encode themselves too, with the same
// rule as jsonenc.go: exactly encoding/json's bytes, or nil where encoding/json
// would fail (an input or structured output that is not JSON, a float
// that is NaN or infinite, a time outside RFC 3339). Values of type any
// (a failed validator's params, the outputs of steps routed by intent)
// are rare and go through encoding/json.

// AppendJSON appends the payload's JSON to b.
func (e ModelTurnEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.int("turn", int64(e.Turn))
	o.stringOmit("stop_reason", e.StopReason)
	o.int("tool_calls", int64(e.ToolCalls))
	o.key("usage")
	o.put(e.Usage.appendJSON(o.b))
	o.int("duration_ms", e.DurationMs)
	o.intOmit("unreported_attempts", int64(e.UnreportedAttempts))
	o.stringOmit("query", e.Query)
	if e.Message != nil {
		o.key("message")
		o.put(e.Message.appendJSON(o.b))
	}
	o.rawOmit("structured_output", e.StructuredOutput)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e SessionMessagesEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("session_id", e.SessionID)
	o.key("messages")
	o.put(appendArray(o.b, e.Messages, Message.appendJSON))
	o.boolOmit("replace", e.Replace)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (r QueryResult) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("session_id", r.SessionID)
	o.strings("responses", r.Responses)
	if len(r.ToolUses) > 0 {
		o.key("tool_uses")
		o.put(appendArray(o.b, r.ToolUses, ToolUse.AppendJSON))
	}
	o.rawOmit("structured_output", r.StructuredOutput)
	o.key("usage")
	o.put(r.Usage.appendJSON(o.b))
	o.floatOmit("cost_usd", r.CostUSD)
	o.int("turns", int64(r.Turns))
	o.stringOmit("stop_reason", r.StopReason)
	o.boolOmit("session_renewed", r.SessionRenewed)
	o.intOmit("unreported_attempts", int64(r.UnreportedAttempts))
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e CompactionEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.stringOmit("session_id", e.SessionID)
	o.int("window", e.Window)
	o.int("tokens_before", e.TokensBefore)
	o.int("tokens_after", e.TokensAfter)
	o.stringsOmit("stubbed_calls", e.StubbedCalls)
	o.intOmit("stubbed_bytes", int64(e.StubbedBytes))
	o.intOmit("summarized_messages", int64(e.SummarizedMessages))
	o.stringOmit("summary_model", e.SummaryModel)
	o.stringOmit("summary", e.Summary)
	o.key("usage")
	o.put(e.Usage.appendJSON(o.b))
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e ModelUsageEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.int("turn", int64(e.Turn))
	o.key("usage")
	o.put(e.Usage.appendJSON(o.b))
	o.boolOmit("unreported", e.Unreported)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e RetryEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("provider", e.Provider)
	o.int("attempt", int64(e.Attempt))
	o.int("delay_ms", e.DelayMs)
	o.string("code", e.Code)
	o.intOmit("status", int64(e.Status))
	o.string("message", e.Message)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e ToolIntentEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("id", e.ID)
	o.string("name", e.Name)
	o.string("input_digest", e.InputDigest)
	o.string("query", e.Query)
	o.int("turn", int64(e.Turn))
	o.boolOmit("idempotent", e.Idempotent)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e CheckEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.bool("complete", e.Complete)
	o.stringOmit("reason", e.Reason)
	o.boolOmit("declared", e.Declared)
	if e.Validation != nil {
		o.key("validation")
		o.put(e.Validation.appendJSON(o.b))
	}
	o.stringOmit("verdict", string(e.Verdict))
	o.stringsOmit("verified", e.Verified)
	o.stringOmit("closureVerdict", e.ClosureVerdict)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e RetryPromptEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("kind", e.Kind)
	o.string("step", e.Step)
	o.stringOmit("pattern", e.Pattern)
	o.stringOmit("validator", e.Validator)
	if len(e.Params) > 0 {
		o.any("params", e.Params)
	}
	o.string("source", e.Source)
	o.int("attempt", int64(e.Attempt))
	o.int("maxAttempts", int64(e.Max))
	o.string("text", e.Text)
	o.stringsOmit("warnings", e.Warnings)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e StepStateEvent) AppendJSON(b []byte) []byte { return e.appendJSON(b) }

func (e *StepStateEvent) appendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.key("state")
	o.put(e.State.appendJSON(o.b))
	if p := e.Pending; p != nil {
		o.key("pending")
		po := object{b: append(o.b, '{')}
		po.string("text", p.Text)
		po.string("source", p.Source)
		po.stringOmit("kind", p.Kind)
		po.stringOmit("validator", p.Validator)
		po.stringOmit("pattern", p.Pattern)
		po.intOmit("attempt", int64(p.Attempt))
		po.intOmit("maxAttempts", int64(p.Max))
		o.put(po.end())
	}
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e IterationEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.key("summary")
	if e.Summary == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.put(e.Summary.appendJSON(o.b))
	}
	o.key("outcome")
	oo := object{b: append(o.b, '{')}
	oo.bool("complete", e.Outcome.Complete)
	oo.boolOmit("stop", e.Outcome.Stop)
	oo.stringOmit("reason", e.Outcome.Reason)
	oo.stringOmit("error", e.Outcome.Error)
	oo.boolOmit("redo", e.Outcome.Redo)
	o.put(oo.end())
	o.key("runUsage")
	o.put(e.RunUsage.appendJSON(o.b))
	o.float("runCost", e.RunCostUSD)
	if e.StepState != nil {
		o.key("stepState")
		o.put(e.StepState.appendJSON(o.b))
	}
	return o.end()
}

func (s *IterationSummary) appendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.int("iteration", int64(s.Iteration))
	o.stringOmit("sessionId", s.SessionID)
	o.stringOmit("stepId", s.StepID)
	o.stringOmit("prompt", s.Prompt)
	o.strings("assistantResponses", s.AssistantResponses)
	o.key("toolsUsed")
	o.put(appendArray(o.b, s.ToolsUsed, ToolUse.AppendJSON))
	o.key("detectedActions")
	o.put(appendArray(o.b, s.DetectedActions, func(a DetectedAction, b []byte) []byte {
		ao := object{b: append(b, '{')}
		ao.string("type", a.Type)
		ao.rawOmit("detail", a.Detail)
		return ao.end()
	}))
	if len(s.ActionResults) > 0 {
		o.key("actionResults")
		o.put(appendArray(o.b, s.ActionResults, func(a ActionResult, b []byte) []byte {
			ao := object{b: append(b, '{')}
			ao.string("action", a.Action)
			ao.bool("success", a.Success)
			ao.stringOmit("output", a.Output)
			return ao.end()
		}))
	}
	o.rawOmit("structuredOutput", s.StructuredOutput)
	o.strings("errors", s.Errors)
	o.key("usage")
	o.put(s.Usage.appendJSON(o.b))
	o.floatOmit("costUsd", s.CostUSD)
	o.intOmit("usageUnreported", int64(s.UsageUnreported))
	o.time("timestamp", s.Timestamp)
	o.int("durationMs", s.DurationMs)
	return o.end()
}

func (u Usage) appendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.int("input_tokens", u.InputTokens)
	o.int("output_tokens", u.OutputTokens)
	o.intOmit("cache_read_tokens", u.CacheReadTokens)
	o.intOmit("cache_write_tokens", u.CacheWriteTokens)
	return o.end()
}

func (m Message) appendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("role", string(m.Role))
	o.stringOmit("text", m.Text)
	if len(m.ToolCalls) > 0 {
		o.key("tool_calls")
		o.put(appendArray(o.b, m.ToolCalls, func(c ToolCall, b []byte) []byte {
			co := object{b: append(b, '{')}
			co.string("id", c.ID)
			co.string("name", c.Name)
			co.raw("input", c.Input)
			return co.end()
		}))
	}
	if len(m.ToolResults) > 0 {
		o.key("tool_results")
		o.put(appendArray(o.b, m.ToolResults, func(r ToolResult, b []byte) []byte {
			ro := object{b: append(b, '{')}
			ro.string("call_id", r.CallID)
			ro.stringOmit("name", r.Name)
			ro.string("content", r.Content)
			ro.boolOmit("is_error", r.IsError)
			return ro.end()
		}))
	}
	o.rawOmit("reasoning", m.Reasoning)
	o.boolOmit("pinned", m.Pinned)
	return o.end()
}

func (v *ValidationResult) appendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.bool("valid", v.Valid)
	o.stringOmit("pattern", v.Pattern)
	if len(v.Params) > 0 {
		o.any("params", v.Params)
	}
	o.stringOmit("validator", v.Validator)
	if out := v.Output; out != nil {
		o.key("output")
		oo := object{b: append(o.b, '{')}
		oo.string("stdout", out.Stdout)
		oo.string("stderr", out.Stderr)
		oo.int("exitCode", int64(out.ExitCode))
		oo.boolOmit("truncated", out.Truncated)
		oo.boolOmit("timedOut", out.TimedOut)
		oo.int("durationMs", out.DurationMs)
		o.put(oo.end())
	}
	o.stringsOmit("checked", v.Checked)
	return o.end()
}

func (s StepState) appendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("current", s.Current)
	o.key("visits")
	if s.Visits == nil {
		o.b = append(o.b, "null"...)
	} else {
		keys := make([]string, 0, len(s.Visits))
		for k := range s.Visits {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		vo := object{b: append(o.b, '{')}
		for _, k := range keys {
			if vo.more {
				vo.b = append(vo.b, ',')
			}
			vo.more = true
			vo.b = append(journal.AppendJSONString(vo.b, k), ':')
			vo.b = strconv.AppendInt(vo.b, int64(s.Visits[k]), 10)
		}
		o.put(vo.end())
	}
	o.string("lastEntered", s.LastEntered)
	o.int("consecutive", int64(s.Consecutive))
	o.int("retries", int64(s.Retries))
	o.boolOmit("completed", s.Completed)
	o.boolOmit("aborted", s.Aborted)
	if p := s.Parent; p != nil {
		o.key("parent")
		po := object{b: append(o.b, '{')}
		po.string("step", p.Step)
		po.int("index", int64(p.Index))
		po.intOmit("retries", int64(p.Retries))
		o.put(po.end())
	}
	if r := s.Return; r != nil {
		o.key("return")
		ro := object{b: append(o.b, '{')}
		ro.string("flow", r.Flow)
		ro.string("from", r.From)
		ro.string("target", r.Target)
		o.put(ro.end())
	}
	if len(s.Outputs) > 0 {
		o.any("outputs", s.Outputs)
	}
	return o.end()
}

// appendArray appends a JSON array of s, each element by enc; a nil s is
// null, as encoding/json writes it. It returns nil when an element's
// encoding does.
func appendArray[T any](b []byte, s []T, enc func(T, []byte) []byte) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		if b = enc(v, b); b == nil {
			return nil
		}
	}
	return append(b, ']')
}

// The object methods below add to those of jsonenc.go; each marks the
// object bad (its end is nil) where encoding/json would fail.

func (o *object) strings(k string, v []string) {
	o.key(k)
	o.put(appendArray(o.b, v, func(s string, b []byte) []byte { return journal.AppendJSONString(b, s) }))
}

func (o *object) stringsOmit(k string, v []string) {
	if len(v) > 0 {
		o.strings(k, v)
	}
}

func (o *object) intOmit(k string, v int64) {
	if v != 0 {
		o.int(k, v)
	}
}

// raw writes a json.RawMessage as encoding/json does: null when nil,
// else compacted, and a failure when it is not JSON.
func (o *object) raw(k string, v json.RawMessage) {
	o.key(k)
	if v == nil {
		o.b = append(o.b, "null"...)
		return
	}
	buf := bytes.NewBuffer(o.b)
	if json.Compact(buf, v) != nil {
		o.bad = true
		return
	}
	o.b = buf.Bytes()
}

func (o *object) rawOmit(k string, v json.RawMessage) {
	if len(v) > 0 {
		o.raw(k, v)
	}
}

// float writes a float64 as encoding/json does: the shortest decimal
// that reads back as v, in exponent form below 1e-6 and from 1e21 on
// (with at least two exponent digits dropped to one when the second is
// a leading zero, "1e-07" as "1e-7"); NaN and the infinities fail.
func (o *object) float(k string, v float64) {
	o.key(k)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		o.bad = true
		return
	}
	format := byte('f')
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	o.b = strconv.AppendFloat(o.b, v, format, -1, 64)
	if n := len(o.b); format == 'e' && n >= 4 && o.b[n-4] == 'e' && o.b[n-3] == '-' && o.b[n-2] == '0' {
		o.b[n-2] = o.b[n-1]
		o.b = o.b[:n-1]
	}
}

func (o *object) floatOmit(k string, v float64) {
	if v != 0 {
		o.float(k, v)
	}
}

// time writes a time.Time as its MarshalJSON does (RFC 3339 with
// nanoseconds), and fails where MarshalJSON fails: a year outside
// 0–9999 or a zone offset of 24 hours or more.
func (o *object) time(k string, t time.Time) {
	o.key(k)
	start := len(o.b) + 1
	o.b = append(o.b, '"')
	o.b = t.AppendFormat(o.b, time.RFC3339Nano)
	s := o.b[start:]
	bad := len(s) < 5 || s[4] != '-'
	if !bad && s[len(s)-1] != 'Z' {
		if len(s) < 6 {
			bad = true
		} else if c := s[len(s)-6]; '0' <= c && c <= '9' {
			bad = true // an offset with seconds
		} else if h := s[len(s)-5 : len(s)-3]; h[0] > '2' || (h[0] == '2' && h[1] >= '4') {
			bad = true
		}
	}
	if bad {
		o.bad = true
		return
	}
	o.b = append(o.b, '"')
}

// any writes a value of type any through encoding/json (with HTML left
// unescaped, as the journal writes it).
func (o *object) any(k string, v any) {
	o.key(k)
	buf := bytes.NewBuffer(o.b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		o.bad = true
		return
	}
	o.b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
