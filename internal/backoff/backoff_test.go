package backoff

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	e := Exponential{Base: 100 * time.Millisecond, Max: time.Second}
	for i, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		if got := e.Delay(i+1, 0); got != want*time.Millisecond {
			t.Errorf("retry %d: %v, want %v", i+1, got, want*time.Millisecond)
		}
	}
	// Jitter takes off at most its fraction.
	j := Exponential{Base: 100 * time.Millisecond, Max: time.Second, Jitter: 0.25}
	if lo, hi := j.Delay(1, 0.999999), j.Delay(1, 0); lo <= 75*time.Millisecond || hi != 100*time.Millisecond {
		t.Errorf("jitter range %v..%v", lo, hi)
	}
	half := Exponential{Base: 200 * time.Millisecond, Max: time.Second, Jitter: 0.5}
	if got := half.Delay(2, 1); got != 200*time.Millisecond {
		t.Errorf("half jitter: %v", got)
	}
	// No cap: doubling never overflows.
	u := Exponential{Base: time.Second}
	if got := u.Delay(3, 0); got != 4*time.Second {
		t.Errorf("uncapped: %v", got)
	}
	if got := u.Delay(1000, 0); got != math.MaxInt64 {
		t.Errorf("uncapped, retry 1000: %v", got)
	}
	if got := (Exponential{}).Delay(5, 0.5); got != 0 {
		t.Errorf("zero: %v", got)
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err == nil {
		t.Fatal("a canceled context did not end the wait")
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}
