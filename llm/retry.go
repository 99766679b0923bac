// The retry policy capstan's HTTP model providers share: a bounded number
// of attempts with exponential backoff and jitter that honours a server's
// retry-after / retry-after-ms headers. The provider decides which failures
// are retryable; the policy decides how long to wait and when to give up.
// Sleep and Rand are injectable so tests run instantly and
// deterministically.

package llm

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/capstan-dev/capstan/internal/backoff"
)

// Defaults of RetryPolicy.
const (
	DefaultMaxAttempts = 4
	DefaultBaseDelay   = 500 * time.Millisecond
	DefaultMaxDelay    = 8 * time.Second
	// DefaultMaxRetryAfter is the longest retry-after capstan waits out
	// by default; a server that asks for longer ends the call with a
	// recoverable error that says when to resume.
	DefaultMaxRetryAfter = 5 * time.Minute
)

// RetryPolicy bounds retries. The zero RetryPolicy uses the defaults.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, the first included
	// (0 = DefaultMaxAttempts; 1 = no retry).
	MaxAttempts int
	// BaseDelay is the first backoff (0 = DefaultBaseDelay); it doubles per
	// retry up to MaxDelay (0 = DefaultMaxDelay).
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxRetryAfter is the longest server-requested wait honoured (0 =
	// DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// Sleep waits d or until ctx ends (nil = a timer); tests inject a
	// recorder.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0,1) for jitter (nil = math/rand/v2).
	Rand func() float64
	// Now is the clock for hints (nil = time.Now).
	Now func() time.Time
}

func (p RetryPolicy) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Attempts is the effective maximum number of attempts.
func (p RetryPolicy) Attempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

// RetryAfterCeiling is the effective MaxRetryAfter.
func (p RetryPolicy) RetryAfterCeiling() time.Duration {
	if p.MaxRetryAfter <= 0 {
		return DefaultMaxRetryAfter
	}
	return p.MaxRetryAfter
}

// Delay is the wait before retry number n (1 = the first retry). A
// server-provided retryAfter is used as is (a server that says "retry
// after 0" means now; Retry stops before a wait over the ceiling); otherwise
// the delay is BaseDelay·2^(n-1), capped at MaxDelay, minus up to 25%
// jitter.
func (p RetryPolicy) Delay(n int, retryAfter time.Duration, hasRetryAfter bool) time.Duration {
	if hasRetryAfter && retryAfter >= 0 {
		return retryAfter
	}
	base, maxD := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if maxD <= 0 {
		maxD = DefaultMaxDelay
	}
	r := p.Rand
	if r == nil {
		r = rand.Float64
	}
	return backoff.Exponential{Base: base, Max: maxD, Jitter: 0.25}.Delay(n, r())
}

// Wait sleeps d with the policy's Sleep, returning ctx's error if it ends
// first.
func (p RetryPolicy) Wait(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return backoff.Sleep(ctx, d)
}

// RetryAfter reads retry-after-ms (milliseconds) or retry-after (seconds
// or an HTTP date) from h. ok is false when neither is present or valid.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return clamp(ms * float64(time.Millisecond)), true
		}
	}
	if v := h.Get("retry-after"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return clamp(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			d := t.Sub(now)
			if d < 0 {
				d = 0
			}
			return d, true
		}
	}
	return 0, false
}

// clamp converts nanoseconds to a Duration without overflowing: anything
// beyond the representable range (a hostile "retry-after: 1e300") becomes
// the maximum, which is over any ceiling.
func clamp(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}
