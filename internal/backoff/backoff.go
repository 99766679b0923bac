// Package backoff is capstan's one exponential backoff: the waits between
// the attempts of a call that may be retried (model requests, pipeline
// stages, escalation webhooks, trace exports). Which failures are retried,
// and how many times, is each caller's; how long to wait is this package's.
package backoff

import (
	"context"
	"math"
	"time"
)

// Exponential is a wait that starts at Base and doubles per retry up to
// Max, of which up to the fraction Jitter is taken off at random so that
// many clients do not retry in step.
type Exponential struct {
	// Base is the wait before the first retry.
	Base time.Duration
	// Max caps the wait (<= 0: no cap but the largest time.Duration).
	Max time.Duration
	// Jitter is the largest fraction of the wait taken off, in [0, 1]
	// (0: the wait is exact).
	Jitter float64
}

// Delay is the wait before retry number n (1 = the first retry):
// Base·2^(n-1), capped at Max, minus Jitter·r of it, where r in [0, 1) is
// the caller's random number (0: the full wait).
func (e Exponential) Delay(n int, r float64) time.Duration {
	limit := e.Max
	if limit <= 0 {
		limit = math.MaxInt64
	}
	d := e.Base
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	d = min(d, limit)
	return d - time.Duration(float64(d)*e.Jitter*r)
}

// Sleep waits d, or until ctx ends and returns its error (at once when d
// is not positive).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
