package scaleout

import (
	"testing"
	"time"
)

// outageBackoff predicts the activity retry policy's wait (1 s, doubled
// per attempt, at most a minute): retryFits compares it with the run's
// deadline.
func TestOutageBackoffFollowsTheRetryPolicy(t *testing.T) {
	for n, want := range map[int32]time.Duration{1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, outageAttempts: time.Minute} {
		if got := outageBackoff(n); got != want {
			t.Errorf("outageBackoff(%d) = %v, want %v", n, got, want)
		}
	}
}
