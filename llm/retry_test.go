package llm

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestDelayBackoffCapAndJitter(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Rand: func() float64 { return 0 }}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.Delay(i+1, 0, false); got != w*time.Millisecond {
			t.Errorf("retry %d: %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	p.Rand = func() float64 { return 0.999 }
	if got := p.Delay(1, 0, false); got <= 75*time.Millisecond || got > 100*time.Millisecond {
		t.Errorf("jitter out of range: %v", got)
	}
	// Server-provided delays win, including 0 and long ones (Retry stops
	// before a wait over the ceiling).
	if got := p.Delay(3, 0, true); got != 0 {
		t.Errorf("retry-after 0: %v", got)
	}
	if got := p.Delay(1, 2*time.Second, true); got != 2*time.Second {
		t.Errorf("retry-after 2s: %v", got)
	}
	if got := p.Delay(1, 90*time.Second, true); got != 90*time.Second {
		t.Errorf("retry-after 90s replaced by backoff: %v", got)
	}
	if (RetryPolicy{}).Attempts() != DefaultMaxAttempts || (RetryPolicy{MaxAttempts: 1}).Attempts() != 1 {
		t.Error("attempts default")
	}
}

func TestRetryAfterHeaders(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	h := http.Header{}
	if _, ok := RetryAfter(h, now); ok {
		t.Fatal("empty header")
	}
	h.Set("retry-after", "3")
	if d, ok := RetryAfter(h, now); !ok || d != 3*time.Second {
		t.Fatalf("seconds: %v %v", d, ok)
	}
	h.Set("retry-after-ms", "1500")
	if d, ok := RetryAfter(h, now); !ok || d != 1500*time.Millisecond {
		t.Fatalf("ms wins: %v %v", d, ok)
	}
	h = http.Header{}
	h.Set("retry-after", now.Add(7*time.Second).Format(http.TimeFormat))
	if d, ok := RetryAfter(h, now); !ok || d != 7*time.Second {
		t.Fatalf("date: %v %v", d, ok)
	}
	h.Set("retry-after", "soon")
	if _, ok := RetryAfter(h, now); ok {
		t.Fatal("garbage accepted")
	}
	h.Set("retry-after", "-4")
	if _, ok := RetryAfter(h, now); ok {
		t.Fatal("negative accepted")
	}
}

func TestWaitHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (RetryPolicy{}).Wait(ctx, time.Hour); err == nil {
		t.Fatal("Wait ignored a cancelled context")
	}
	if err := (RetryPolicy{}).Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func FuzzRetryAfter(f *testing.F) {
	f.Add("1", "")
	f.Add("", "250.5")
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT", "NaN")
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{}
		h.Set("retry-after", ra)
		h.Set("retry-after-ms", ms)
		d, ok := RetryAfter(h, time.Now())
		if ok && d < 0 {
			t.Fatalf("negative delay %v", d)
		}
		if got := (RetryPolicy{Rand: func() float64 { return 0.5 }}).Delay(2, d, ok); got < 0 {
			t.Fatalf("negative wait %v", got)
		}
	})
}
