package event

import (
	"strconv"

	"github.com/capstan-dev/capstan/journal"
)

// The payloads of the events every iteration and every tool call writes
// encode themselves without reflection: each AppendJSON appends exactly
// the bytes encoding/json's Encoder (with SetEscapeHTML(false), as the
// journal encodes) writes for the value, without its newline. The
// journal's Writer uses it when a payload has it (journal.AppendJSONer);
// TestAppendJSONMatchesEncodingJSON and FuzzAppendJSON hold the bytes
// equal.

// AppendJSON appends the payload's JSON to b.
func (e IterationStartEvent) AppendJSON(b []byte) []byte {
	b = append(b, `{"iteration":`...)
	b = strconv.AppendInt(b, int64(e.Iteration), 10)
	return append(b, '}')
}

// AppendJSON appends the payload's JSON to b.
func (e PromptEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.stringOmit("source", e.Source)
	o.string("text", e.Text)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e QueryStartEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.stringOmit("session_id", e.SessionID)
	o.stringOmit("source", e.Source)
	o.stringOmit("model", e.Model)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e StepMove) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("from", e.From)
	o.string("to", e.To)
	o.string("kind", e.Kind)
	o.bool("passed", e.Passed)
	o.boolOmit("complete", e.Complete)
	o.boolOmit("aborted", e.Aborted)
	o.stringOmit("reason", e.Reason)
	o.stringOmit("intent", e.Intent)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e LifecycleEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("state", e.State)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e WarningEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("message", e.Message)
	o.stringOmit("session_id", e.SessionID)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e ErrorEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.stringOmit("code", e.Code)
	o.string("message", e.Message)
	o.bool("recoverable", e.Recoverable)
	return o.end()
}

// AppendJSON appends the payload's JSON to b.
func (e ValidatorEvent) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("validator", e.Validator)
	o.string("type", e.Type)
	o.bool("valid", e.Valid)
	o.stringOmit("pattern", e.Pattern)
	o.int("exitCode", int64(e.ExitCode))
	o.boolOmit("timedOut", e.TimedOut)
	o.boolOmit("truncated", e.Truncated)
	o.int("durationMs", e.DurationMs)
	o.stringOmit("output", e.Output)
	if e.OutputOmitted != 0 {
		o.int("outputOmitted", int64(e.OutputOmitted))
	}
	return o.end()
}

// AppendJSON appends the payload's JSON to b. An input that is not valid
// JSON (encoding/json refuses it) is left to encoding/json: AppendJSON
// returns nil and the journal records its error as it always did.
func (u ToolUse) AppendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	o.string("id", u.ID)
	o.string("name", u.Name)
	o.raw("input", u.Input)
	o.string("output", u.Output)
	o.boolOmit("is_error", u.IsError)
	o.boolOmit("denied", u.Denied)
	o.int("duration_ms", u.DurationMs)
	o.boolOmit("replayed", u.Replayed)
	return o.end()
}

// object appends the fields of one JSON object, commas included.
// An object whose field encoding/json could not encode is bad: its end is
// nil.
type object struct {
	b    []byte
	more bool
	bad  bool
}

func (o *object) key(k string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

func (o *object) string(k, v string) {
	o.key(k)
	o.b = journal.AppendJSONString(o.b, v)
}

func (o *object) stringOmit(k, v string) {
	if v != "" {
		o.string(k, v)
	}
}

func (o *object) bool(k string, v bool) {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

func (o *object) boolOmit(k string, v bool) {
	if v {
		o.bool(k, v)
	}
}

func (o *object) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *object) end() []byte {
	if o.bad {
		return nil
	}
	return append(o.b, '}')
}

// put takes b, a nested value's encoding appended to o.b, or marks o bad
// when that encoding failed (b is nil).
func (o *object) put(b []byte) {
	if b == nil {
		o.bad = true
		return
	}
	o.b = b
}
