// A request to change a protected test: the model's answer has one or more
// lines
//
//	REQUEST_TEST_CHANGE: <file> <reason>
//
// (text the model itself writes, so it works on every backend). The stage
// hands the request to its TestChanges handler, which by the agent's
// policy stops the run for a human or decides it by the hidden tests; the
// request never completes the iteration. Tool output does not count: only
// the model's own responses are read.

package verdict

import (
	"context"
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verify"
)

// ReasonTestChangeRequested: the run stopped for a human to approve or
// reject the model's request to change protected files.
const ReasonTestChangeRequested = "test_change_requested"

// TestChangeAsk is one line of a request: the file and the model's reason.
type TestChangeAsk struct {
	File   string `json:"file"`
	Reason string `json:"reason,omitempty"`
}

// FindTestChangeRequest returns the request lines of an iteration's
// answers, one per file, in order (a file named twice keeps its first
// reason).
func FindTestChangeRequest(s *event.IterationSummary) []TestChangeAsk {
	if s == nil {
		return nil
	}
	var out []TestChangeAsk
	seen := map[string]bool{}
	for _, r := range s.AssistantResponses {
		for _, l := range strings.Split(r, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimLeft(l, " \t>*_`#-"), verify.TestChangeMarker)
			if !ok {
				continue
			}
			rest = strings.Trim(rest, " \t*_`")
			file, reason, _ := strings.Cut(rest, " ")
			file = strings.Trim(file, "`'\"")
			if file == "" || seen[file] {
				continue
			}
			seen[file] = true
			out = append(out, TestChangeAsk{File: file, Reason: clip(strings.Trim(reason, " \t*_`"), maxReason)})
		}
	}
	return out
}

// TestChangeHandler decides the model's request to change protected
// files (the agent's runner.verification.testChanges policy).
type TestChangeHandler interface {
	// Request handles the request of iteration. It returns a Verdict with
	// Action Stop (the run waits for a human) or Retry (with the prompt
	// that tells the model the outcome); the stage fills Step.
	RequestTestChange(ctx context.Context, iteration int, asks []TestChangeAsk) (Verdict, error)
}

// testChange hands a request to the handler and journals its verdict.
func (s *Stage) testChange(ctx context.Context, v Verdict, in Input, asks []TestChangeAsk) (Verdict, error) {
	out, err := s.cfg.TestChanges.RequestTestChange(ctx, in.Iteration, asks)
	if err != nil {
		return v, err
	}
	out.Step = v.Step
	if out.Retry != nil {
		out.Retry.Step = v.Step
	}
	s.emitCheck(out)
	if out.Action == Retry && out.Retry != nil {
		s.cfg.Events.Emit(*out.Retry)
	}
	return out, nil
}
