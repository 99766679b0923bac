package workflow

import (
	"context"
	"errors"
	"fmt"
	"github.com/capstan-dev/capstan/event"
	"slices"
	"strings"
)

// Step names one change of an issue within a move: the issue, the phase
// the move leaves, the move's cycle, and the step (add-labels,
// remove-labels, comment, close, or a compensation). The Runner passes
// it to every Issues call of a move in the call's context (StepOf), so a
// store that may see a call twice — an activity retried on Temporal —
// can apply it once.
type Step struct {
	Issue int    `json:"issue"`
	Phase string `json:"phase"`
	Cycle int    `json:"cycle"`
	Name  string `json:"step"`
}

type stepKey struct{}

// WithStep returns ctx carrying s.
func WithStep(ctx context.Context, s Step) context.Context {
	return context.WithValue(ctx, stepKey{}, s)
}

// StepOf returns the step ctx carries; ok is false for a call made outside
// a move (reading labels, listing).
func StepOf(ctx context.Context) (Step, bool) {
	s, ok := ctx.Value(stepKey{}).(Step)
	return s, ok
}

// Key is the idempotency key of the step in workflow run runID:
// runID/issue-N/PHASE/cycle-K/STEP.
func (s Step) Key(runID string) string {
	return fmt.Sprintf("%s/issue-%d/%s/cycle-%d/%s", runID, s.Issue, s.Phase, s.Cycle, s.Name)
}

// Kinds of Change.
const (
	ChangeLabels  = "labels"
	ChangeComment = "comment"
	ChangeClose   = "close"
)

// Change is one write to an issue, under an idempotency key.
type Change struct {
	Key   string `json:"key"`
	Issue int    `json:"issue"`
	// Kind is ChangeLabels (Remove, Add), ChangeComment (Body) or
	// ChangeClose.
	Kind   string   `json:"kind"`
	Remove []string `json:"remove,omitempty"`
	Add    []string `json:"add,omitempty"`
	Body   string   `json:"body,omitempty"`
}

// keyMarkerPrefix starts the hidden line a comment posted under a key
// carries (an HTML comment: GitHub does not render it).
const keyMarkerPrefix = "<!-- capstan-step: "

// KeyMarker is the hidden line a comment posted under key ends with.
func KeyMarker(key string) string {
	// "--" would end the HTML comment early; a key never needs it.
	return keyMarkerPrefix + strings.ReplaceAll(key, "--", "- -") + " -->"
}

// keyScan is how many of an issue's latest comments ApplyOnce searches
// for a comment's key marker.
const keyScan = 50

// ApplyOnce applies c to issues unless its effect is already there, and
// reports whether it wrote: the labels are already as c leaves them; a
// comment carrying c's key marker is among the issue's latest comments
// (the marker is added to the body); the issue is already closed. Run
// again after a crash at any point — before the write, during it, after
// it — it writes at most once, so a retried activity never applies a
// change twice.
func ApplyOnce(ctx context.Context, issues Issues, c Change) (bool, error) {
	if c.Key == "" {
		return false, errors.New("a change needs an idempotency key")
	}
	switch c.Kind {
	case ChangeLabels:
		have, err := issues.Labels(ctx, c.Issue)
		if err != nil {
			return false, err
		}
		if !slices.ContainsFunc(c.Remove, func(l string) bool { return slices.Contains(have, l) }) &&
			!slices.ContainsFunc(c.Add, func(l string) bool { return !slices.Contains(have, l) }) {
			return false, nil
		}
		return true, issues.EditLabels(ctx, c.Issue, c.Remove, c.Add)
	case ChangeComment:
		marker := KeyMarker(c.Key)
		recent, err := issues.RecentComments(ctx, c.Issue, keyScan)
		if err != nil {
			return false, err
		}
		// Only a comment that ends with the marker counts: the body before
		// it may hold a model's text, which could quote a later step's
		// marker to suppress that comment.
		if slices.ContainsFunc(recent, func(b string) bool { return strings.HasSuffix(strings.TrimRight(b, " \t\r\n"), marker) }) {
			return false, nil
		}
		return true, issues.Comment(ctx, c.Issue, c.Body+"\n\n"+marker)
	case ChangeClose:
		closed, err := issues.Closed(ctx, c.Issue)
		if err != nil {
			return false, err
		}
		if closed {
			return false, nil
		}
		return true, issues.Close(ctx, c.Issue)
	}
	return false, fmt.Errorf("unknown change kind %q", c.Kind)
}

// StubOutcome is the fixed outcome of agent a under --stub-dispatch
// (outcomes: agent id → outcome, default success): a validator's verdict,
// a transformer's success or failure (another word is its verdict, for
// fallbackPhases).
func StubOutcome(a *Agent, outcomes map[string]string) event.WorkflowOutcome {
	o, ok := outcomes[a.ID]
	if !ok {
		o = "success"
	}
	if a.Role == Validator {
		return event.WorkflowOutcome{Success: true, Verdict: o, Reason: "stub"}
	}
	out := event.WorkflowOutcome{Success: o == "success", Reason: "stub"}
	if o != "success" && o != "failed" {
		out.Verdict = o
	}
	return out
}
