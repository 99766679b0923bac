package agent

import (
	"errors"
	"github.com/capstan-dev/capstan/event"
	"strings"
	"testing"
)

// A failure while stopping is never dropped: it is the run's error, or a
// warning when the run completed or already ended with an error (a journal
// replaced by another process must be said even when the budget ran out).
func TestStopErrorsAreNeverDropped(t *testing.T) {
	swap := errors.New("journal: events.jsonl was replaced")
	for _, tc := range []struct {
		name        string
		success     bool
		earlier     error
		wantError   string
		wantWarning bool
	}{
		{"failed run without an error", false, nil, "was replaced", false},
		{"completed run", true, nil, "", true},
		{"run that already ended with an error", false, errors.New("iteration budget exhausted"), "iteration budget", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{result: &event.RunResult{}}
			a.result.Success = tc.success
			if tc.earlier != nil {
				a.result.Error = event.NewResultError(tc.earlier)
			}
			a.noteStopError(swap)
			got := ""
			if a.result.Error != nil {
				got = a.result.Error.Message
			}
			if tc.wantError == "" && a.result.Error != nil || tc.wantError != "" && !strings.Contains(got, tc.wantError) {
				t.Errorf("error %q, want one containing %q", got, tc.wantError)
			}
			warned := false
			for _, w := range a.result.Warnings {
				warned = warned || strings.Contains(w, "was replaced")
			}
			if warned != tc.wantWarning {
				t.Errorf("warnings %q: want the swap among them: %v", a.result.Warnings, tc.wantWarning)
			}
		})
	}
}
