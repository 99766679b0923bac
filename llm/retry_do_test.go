package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

type recorder struct{ types []string }

func (r *recorder) Emit(p event.Payload) {
	t, _ := string(p.EventKind()), any(p)
	r.types = append(r.types, t)
}

func TestDo(t *testing.T) {
	var waits []time.Duration
	p := RetryPolicy{MaxAttempts: 3, Rand: func() float64 { return 0 },
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	hints := map[string]string{agenterr.CodeSdkRateLimit: "slow down"}
	fail := func(f RetryFailure) func(int) (string, *RetryFailure) {
		return func(int) (string, *RetryFailure) { return "", &f }
	}
	t.Run("succeeds after retries, honouring retry-after", func(t *testing.T) {
		waits = nil
		ev := &recorder{}
		v, err := Retry(context.Background(), p, RetryCall{Provider: "x", Events: ev}, func(n int) (string, *RetryFailure) {
			if n < 3 {
				return "", &RetryFailure{Code: agenterr.CodeSdkRateLimit, Retryable: true, RetryAfter: 2 * time.Second, HasRetryAfter: true}
			}
			return "ok", nil
		})
		if err != nil || v != "ok" || len(waits) != 2 || waits[0] != 2*time.Second || len(ev.types) != 2 {
			t.Fatalf("%q %v waits=%v events=%v", v, err, waits, ev.types)
		}
	})
	t.Run("a wait past the time budget ends the call at once, recoverable", func(t *testing.T) {
		waits = nil
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := Retry(ctx, RetryPolicy{MaxAttempts: 3, MaxRetryAfter: 24 * time.Hour, Sleep: p.Sleep}, RetryCall{Provider: "x"},
			fail(RetryFailure{Code: agenterr.CodeSdkRateLimit, Retryable: true, Message: "429", RetryAfter: 2 * time.Hour, HasRetryAfter: true}))
		e := agenterr.From(err)
		if e == nil || !e.Recoverable || e.Code != agenterr.CodeSdkRateLimit || len(waits) != 0 ||
			!strings.Contains(e.Message, "after the end of the run's time budget") || !strings.HasPrefix(e.Hint, "resume the run after ") {
			t.Fatalf("waits %v, %+v", waits, e)
		}
	})
	t.Run("gives up, recoverable, with the hint", func(t *testing.T) {
		_, err := Retry(context.Background(), p, RetryCall{Provider: "x", Hints: hints}, fail(RetryFailure{Code: agenterr.CodeSdkRateLimit, Retryable: true, Message: "429"}))
		e := agenterr.From(err)
		if e == nil || !e.Recoverable || e.Hint != "slow down" || e.Message != "x: 429 (gave up after 3 attempts)" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("permanent failures are not recoverable and not retried", func(t *testing.T) {
		calls := 0
		_, err := Retry(context.Background(), p, RetryCall{Provider: "x", Hints: hints}, func(int) (string, *RetryFailure) {
			calls++
			return "", &RetryFailure{Code: agenterr.CodeSdkRateLimit, Permanent: true, Hint: "pay up"}
		})
		e := agenterr.From(err)
		if calls != 1 || e.Recoverable || e.Hint != "pay up" {
			t.Fatalf("calls=%d %+v", calls, e)
		}
	})
	t.Run("auth is not recoverable", func(t *testing.T) {
		_, err := Retry(context.Background(), p, RetryCall{Provider: "x"}, fail(RetryFailure{Code: agenterr.CodeSdkAuth}))
		if !errors.Is(err, agenterr.ErrSdkAuth) || agenterr.IsRecoverable(err) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("retry-after over 60s is waited out up to the ceiling", func(t *testing.T) {
		waits = nil
		q := p
		q.MaxRetryAfter = 2 * time.Minute
		v, err := Retry(context.Background(), q, RetryCall{Provider: "x"}, func(n int) (string, *RetryFailure) {
			if n == 1 {
				return "", &RetryFailure{Code: agenterr.CodeSdkRateLimit, Retryable: true, RetryAfter: 90 * time.Second, HasRetryAfter: true}
			}
			return "ok", nil
		})
		if err != nil || v != "ok" || len(waits) != 1 || waits[0] != 90*time.Second {
			t.Fatalf("%q %v waits=%v", v, err, waits)
		}
	})
	t.Run("retry-after over the ceiling stops, recoverable, saying when to resume", func(t *testing.T) {
		waits = nil
		q := p
		q.Now = func() time.Time { return time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC) }
		calls := 0
		_, err := Retry(context.Background(), q, RetryCall{Provider: "x", Hints: hints}, func(int) (string, *RetryFailure) {
			calls++
			return "", &RetryFailure{Code: agenterr.CodeSdkRateLimit, Retryable: true, Message: "HTTP 429", RetryAfter: 2 * time.Hour, HasRetryAfter: true}
		})
		e := agenterr.From(err)
		if calls != 1 || len(waits) != 0 || e == nil || !e.Recoverable || e.Code != agenterr.CodeSdkRateLimit ||
			!strings.Contains(e.Hint, "resume the run after 2026-11-25T00:00:00Z") ||
			!strings.Contains(e.Message, "retry after 2h0m0s, more than the 5m0s capstan waits") {
			t.Fatalf("calls=%d waits=%v %+v", calls, waits, e)
		}
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		q := p
		q.Sleep = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
		_, err := Retry(ctx, q, RetryCall{Provider: "x"}, fail(RetryFailure{Code: agenterr.CodeSdkConnection, Retryable: true}))
		if !errors.Is(err, agenterr.ErrCanceled) {
			t.Fatalf("%v", err)
		}
	})
}
