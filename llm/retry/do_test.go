package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
)

type recorder struct{ types []string }

func (r *recorder) Emit(t string, _ any) { r.types = append(r.types, t) }

func TestDo(t *testing.T) {
	var waits []time.Duration
	p := Policy{MaxAttempts: 3, Rand: func() float64 { return 0 },
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	hints := map[string]string{agenterr.CodeSdkRateLimit: "slow down"}
	fail := func(f Failure) func(int) (string, *Failure) {
		return func(int) (string, *Failure) { return "", &f }
	}
	t.Run("succeeds after retries, honouring retry-after", func(t *testing.T) {
		waits = nil
		ev := &recorder{}
		v, err := Do(context.Background(), p, Call{Provider: "x", Events: ev}, func(n int) (string, *Failure) {
			if n < 3 {
				return "", &Failure{Code: agenterr.CodeSdkRateLimit, Retryable: true, RetryAfter: 2 * time.Second, HasRetryAfter: true}
			}
			return "ok", nil
		})
		if err != nil || v != "ok" || len(waits) != 2 || waits[0] != 2*time.Second || len(ev.types) != 2 {
			t.Fatalf("%q %v waits=%v events=%v", v, err, waits, ev.types)
		}
	})
	t.Run("gives up, recoverable, with the hint", func(t *testing.T) {
		_, err := Do(context.Background(), p, Call{Provider: "x", Hints: hints}, fail(Failure{Code: agenterr.CodeSdkRateLimit, Retryable: true, Message: "429"}))
		e := agenterr.From(err)
		if e == nil || !e.Recoverable || e.Hint != "slow down" || e.Message != "x: 429 (gave up after 3 attempts)" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("permanent failures are not recoverable and not retried", func(t *testing.T) {
		calls := 0
		_, err := Do(context.Background(), p, Call{Provider: "x", Hints: hints}, func(int) (string, *Failure) {
			calls++
			return "", &Failure{Code: agenterr.CodeSdkRateLimit, Permanent: true, Hint: "pay up"}
		})
		e := agenterr.From(err)
		if calls != 1 || e.Recoverable || e.Hint != "pay up" {
			t.Fatalf("calls=%d %+v", calls, e)
		}
	})
	t.Run("auth is not recoverable", func(t *testing.T) {
		_, err := Do(context.Background(), p, Call{Provider: "x"}, fail(Failure{Code: agenterr.CodeSdkAuth}))
		if !errors.Is(err, agenterr.ErrSdkAuth) || agenterr.IsRecoverable(err) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		q := p
		q.Sleep = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
		_, err := Do(ctx, q, Call{Provider: "x"}, fail(Failure{Code: agenterr.CodeSdkConnection, Retryable: true}))
		if !errors.Is(err, agenterr.ErrCanceled) {
			t.Fatalf("%v", err)
		}
	})
}
