package jsonvalue

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrBudget is returned (wrapped) when a template walk exceeds its
// budget: its steps, its output or a value it builds.
var ErrBudget = errors.New("template exceeds its budget")

// Limits bound one template walk. The evaluator that walks fills zero
// fields with its own defaults before it makes a Budget.
type Limits struct {
	// MaxOutput caps the text written (bytes); the Go-template evaluator
	// caps every string a function builds with it too.
	MaxOutput int
	// MaxSteps caps the work: one step per node walked and per loop item.
	MaxSteps int
}

// Budget is the bound both template evaluators walk JSON values under
// (the Handlebars renderer and the Go-template evaluator of skills): it
// counts the steps and the text of one walk, refuses a step or a write
// over Limits with an error wrapping ErrBudget, and checks the context
// every 1024 steps, so a runaway template stops in the goroutine that
// walks it.
type Budget struct {
	ctx   context.Context
	lim   Limits
	steps int
	out   strings.Builder
}

// NewBudget returns the budget of one walk under ctx and lim, as a value
// the evaluator keeps in its state (no allocation of its own). Do not copy
// it once written to.
func NewBudget(ctx context.Context, lim Limits) Budget {
	return Budget{ctx: ctx, lim: lim}
}

// Step counts one unit of work.
func (b *Budget) Step() error {
	b.steps++
	if b.steps > b.lim.MaxSteps {
		return fmt.Errorf("%w: more than %d steps", ErrBudget, b.lim.MaxSteps)
	}
	if b.steps&1023 == 0 {
		return b.ctx.Err()
	}
	return nil
}

// Write appends s to the text, unless the text would grow over
// MaxOutput.
func (b *Budget) Write(s string) error {
	if b.out.Len()+len(s) > b.lim.MaxOutput {
		return fmt.Errorf("%w: output larger than %d bytes", ErrBudget, b.lim.MaxOutput)
	}
	b.out.WriteString(s)
	return nil
}

// Text is what was written.
func (b *Budget) Text() string { return b.out.String() }
