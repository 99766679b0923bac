// Completion handlers say whether the model declared or reached
// completion: CompletionHandler and its implementations (keyword,
// structured declaration, budget, step flow, composite, external state,
// custom), built from runner.completion by CompletionFromConfig. The
// validators that check the world are package verify's; the retry prompts
// that their failure patterns select are in completion_retry.go.

package verdict

import (
	"context"

	"github.com/capstan-dev/capstan/event"
)

// CompletionContext is what a handler sees when checking.
type CompletionContext struct {
	// Iteration is the 1-based iteration just finished (> 0).
	Iteration int
	// Summary is that iteration's summary.
	Summary *event.IterationSummary
	// Summaries are all summaries so far, Summary last.
	Summaries []event.IterationSummary
	// StepComplete is true when the step machine reached a completing
	// transition this iteration.
	StepComplete bool
}

// CompletionHandler decides whether a run is complete. Check evaluates the context and
// updates the handler's state; IsComplete and Reason only read that state
// and reflect the last Check. When IsComplete is true, Reason is non-empty.
type CompletionHandler interface {
	Check(ctx context.Context, c CompletionContext) (event.CompletionResult, error)
	IsComplete() bool
	Reason() string
}
