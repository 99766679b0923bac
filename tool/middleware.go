package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Call is one tool call on its way through a Handler chain.
type Call struct {
	// ID is the call's id in the transcript; its result answers it.
	ID string
	// Name is the tool name the model asked for.
	Name string
	// Input is the call's JSON input; never empty ("{}" when the model
	// sent none).
	Input json.RawMessage
	// Tool is the tool of that name, or nil when there is none.
	Tool Tool
}

// Outcome is how a call ended: the result the model reads, whether a
// middleware refused the call without running it, and how long the tool
// ran.
type Outcome struct {
	Result
	// Denied marks a call refused without running (a permission policy, a
	// budget); Content then says why and IsError is set.
	Denied bool
	// Duration is the time the tool itself ran (0 when it did not run).
	Duration time.Duration
	// Replayed marks a result taken from the journal of an earlier attempt
	// of the iteration (the tool-effect ledger, llm.Ledger): the tool did
	// not run again.
	Replayed bool
}

// Denial is the Outcome of a call refused without running, with reason as
// the text the model reads.
func Denial(reason string) Outcome {
	return Outcome{Result: Result{Content: reason, IsError: true}, Denied: true}
}

// Handler handles one tool call. A Handler never fails: every failure is an
// Outcome with IsError set, which the model reads like any other result.
type Handler func(ctx context.Context, call Call) Outcome

// Middleware wraps a Handler with behaviour around each call: a permission
// check, truncation of large results, journaling, live streaming. A
// middleware may answer a call itself without calling next (a denial) or
// change the Outcome next returns.
type Middleware func(next Handler) Handler

// Chain returns h wrapped in mw, the first middleware outermost: a call
// passes mw[0], mw[1], …, then h, and its Outcome comes back the other way.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] != nil {
			h = mw[i](h)
		}
	}
	return h
}

// Invoke is the Handler at the end of a chain: it runs call.Tool and
// measures how long it ran. An error returned by the tool becomes an error
// result ("tool NAME failed: …"); a tool that panics is answered the same
// way ("internal error"), so one broken tool cannot end the run. A call
// whose Tool is nil is an error result naming the unknown tool.
func Invoke(ctx context.Context, call Call) (out Outcome) {
	if call.Tool == nil {
		out.Content, out.IsError = fmt.Sprintf("unknown tool %q", call.Name), true
		return out
	}
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			out.Result = Result{Content: fmt.Sprintf("tool %s failed: internal error: %v", call.Name, r), IsError: true}
		}
		out.Duration = time.Since(start)
	}()
	res, err := call.Tool.Run(ctx, call.Input)
	out.Result = res
	if err != nil {
		out.Result = Result{Content: fmt.Sprintf("tool %s failed: %v", call.Name, err), IsError: true}
	}
	return out
}

// Enforce is middleware that refuses calls p does not allow, with
// "permission denied: <reason>". Calls of unknown tools pass through (the
// end of the chain answers them).
func Enforce(p Policy) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call Call) Outcome {
			if call.Tool != nil {
				if d := p.Decide(call.Tool, call.Input); !d.Allowed {
					return Denial("permission denied: " + d.Reason)
				}
			}
			return next(ctx, call)
		}
	}
}

// Truncate is middleware that caps a result's content at max bytes (cut at
// a UTF-8 boundary) and says so at the end: "[output truncated: N bytes
// total]". A model-chosen input can make a tool print without bound; the
// cap keeps one result from filling the context window.
func Truncate(max int) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call Call) Outcome {
			out := next(ctx, call)
			out.Content = TruncateOutput(out.Content, max)
			return out
		}
	}
}

// TruncateOutput returns s cut to at most max bytes at a UTF-8 boundary,
// followed by a note giving the full size, or s itself when it fits.
func TruncateOutput(s string, max int) string {
	n := len(s)
	if n <= max {
		return s
	}
	return CutUTF8(s, max) + fmt.Sprintf("\n[output truncated: %d bytes total]", n)
}

// CutUTF8 returns the longest start of s of at most n bytes that does not
// split a UTF-8 character (s itself when it fits).
func CutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
