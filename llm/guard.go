package llm

import (
	"context"
	"github.com/capstan-dev/capstan/event"
)

// TurnGuard is asked before each model turn of a query whether the query
// may go on; used is what the query's turns so far used (compaction
// included). A non-nil error ends the query with that error before the
// turn is sent; the transcript so far is kept in the session, as after
// MAX_TURNS. A run's token and cost budgets travel this way, so that one
// query cannot spend past them.
type TurnGuard func(used event.Usage) error

type turnGuardKey struct{}

// WithTurnGuard returns a context whose queries on capstan's tool loop are
// checked by g before each model turn (providers that run their own tool
// loop, such as claude-code, are not). A nil g returns ctx unchanged.
func WithTurnGuard(ctx context.Context, g TurnGuard) context.Context {
	if g == nil {
		return ctx
	}
	return context.WithValue(ctx, turnGuardKey{}, g)
}

// turnGuardFrom returns the guard carried by ctx, or nil.
func turnGuardFrom(ctx context.Context) TurnGuard {
	g, _ := ctx.Value(turnGuardKey{}).(TurnGuard)
	return g
}
