package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// RetryFailure is one failed attempt of an API call, classified by its
// provider.
type RetryFailure struct {
	// Code is the agenterr code of the final error (SDK_RATE_LIMIT,
	// SDK_CONNECTION, SDK_AUTH, SDK_REQUEST, …).
	Code string
	// Status is the HTTP status, 0 when there is none.
	Status int
	// Message describes the failure; it must already be redacted.
	Message string
	// Retryable is true when another attempt may succeed.
	Retryable bool
	// Permanent makes the final error non-recoverable whatever its code
	// (OpenAI's insufficient_quota is a 429 that waiting will not fix).
	Permanent bool
	// RetryAfter is the server's requested wait, when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Hint replaces the call's hint for Code when set.
	Hint string
}

// Recoverable reports whether the final error is recoverable: rate limits
// and connection failures are (resume the run later), unless Permanent.
func (f *RetryFailure) Recoverable() bool {
	return !f.Permanent && (f.Code == agenterr.CodeSdkRateLimit || f.Code == agenterr.CodeSdkConnection)
}

// RetryCall describes a provider's API call for Retry.
type RetryCall struct {
	// Provider names the provider in messages and events ("anthropic").
	Provider string
	// Events receives a model.retry event before each retry (nil = none).
	Events event.Emitter
	// Hints are the hints of the final error by code, unless the failure
	// carries its own.
	Hints map[string]string
}

// Err is the final error of f after attempts attempts.
func (f *RetryFailure) Err(c RetryCall, attempts int) *agenterr.Error {
	msg := c.Provider + ": " + f.Message
	if f.Retryable {
		msg += fmt.Sprintf(" (gave up after %d attempts)", attempts)
	}
	e := agenterr.New(f.Code, agenterr.LayerSDKBridge, f.Recoverable(), "%s", msg)
	if f.HasRetryAfter {
		e.RetryAfter = f.RetryAfter
	}
	e.Hint = f.Hint
	if e.Hint == "" {
		e.Hint = c.Hints[f.Code]
	}
	return e
}

// tooLong is the final error of a failure whose retry-after is over the
// ceiling: recoverable (unless permanent), with a hint saying when the
// server will take requests again.
func (f *RetryFailure) tooLong(c RetryCall, attempts int, ceiling time.Duration, now time.Time) *agenterr.Error {
	msg := fmt.Sprintf("%s: %s (the server asked to retry after %s, more than the %s capstan waits; stopped after %d attempts)",
		c.Provider, f.Message, f.RetryAfter.Round(time.Second), ceiling, attempts)
	e := agenterr.New(f.Code, agenterr.LayerSDKBridge, !f.Permanent, "%s", msg)
	e.RetryAfter = f.RetryAfter
	if f.RetryAfter < 100*365*24*time.Hour {
		at := now.Add(f.RetryAfter).UTC().Format(time.RFC3339)
		e.Hint = "resume the run after " + at + " (the server's retry-after), or raise runner.requests.maxRetryAfterSeconds / --max-retry-after to wait inside the run"
	} else {
		e.Hint = "the server's retry-after is unbounded; check the provider's status before resuming"
	}
	return e
}

// pastDeadline is the final error of a failure whose next attempt would
// come after ctx's deadline (the run's time budget): recoverable, with a
// hint saying when the server takes requests again.
func (f *RetryFailure) pastDeadline(c RetryCall, attempts int, wait time.Duration, deadline, now time.Time) *agenterr.Error {
	msg := fmt.Sprintf("%s: %s (the next attempt, in %s, would come after the end of the run's time budget in %s; stopped after %d attempts)",
		c.Provider, f.Message, wait.Round(time.Second), max(deadline.Sub(now), 0).Round(time.Second), attempts)
	e := agenterr.New(f.Code, agenterr.LayerSDKBridge, true, "%s", msg)
	if f.HasRetryAfter {
		e.RetryAfter = f.RetryAfter
	}
	e.Hint = "resume the run after " + now.Add(wait).UTC().Format(time.RFC3339) + " (when the server takes requests again), with a larger time budget if needed"
	return e
}

// Retry runs attempt (numbered from 1) until it succeeds, fails with a
// failure that is not retryable, or the policy's attempts are used,
// waiting between attempts as the policy says (honouring the server's
// retry-after). Cancellation is a CANCELED error.
func Retry[T any](ctx context.Context, p RetryPolicy, c RetryCall, attempt func(n int) (T, *RetryFailure)) (T, error) {
	var zero T
	max := p.Attempts()
	for n := 1; ; n++ {
		v, f := attempt(n)
		if f == nil {
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return zero, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerSDKBridge, false, "%s: request canceled", c.Provider)
		}
		if !f.Retryable || n >= max {
			return zero, f.Err(c, n)
		}
		if ceiling := p.RetryAfterCeiling(); f.HasRetryAfter && f.RetryAfter > ceiling {
			return zero, f.tooLong(c, n, ceiling, p.now())
		}
		d := p.Delay(n, f.RetryAfter, f.HasRetryAfter)
		if dl, ok := ctx.Deadline(); ok && f.Recoverable() && p.now().Add(d).After(dl) {
			// Waiting would outlast the run's time budget (the query's
			// deadline): end now, recoverable, rather than be cut by it.
			return zero, f.pastDeadline(c, n, d, dl, p.now())
		}
		if c.Events != nil {
			c.Events.Emit(event.RetryEvent{Provider: c.Provider, Attempt: n, DelayMs: d.Milliseconds(),
				Code: f.Code, Status: f.Status, Message: f.Message})
		}
		if err := p.Wait(ctx, d); err != nil {
			return zero, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerSDKBridge, false, "%s: request canceled while waiting to retry", c.Provider)
		}
	}
}
