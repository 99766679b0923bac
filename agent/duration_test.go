package agent

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// TestRunDurationCountsTheTestBaseline: a run whose test command is slow
// the first time it runs (the baseline before the first iteration, a
// cold build cache) reports a duration that includes that run, and how
// long the baseline took, as its journaled tests.baseline says; a resume,
// which reuses the journaled baseline, takes none.
func TestRunDurationCountsTheTestBaseline(t *testing.T) {
	needTools(t, "git", "go")
	// The marker lives outside the work dir, so git stays clean.
	marker := filepath.Join(t.TempDir(), "warm")
	cmd := "test -e " + marker + " || { sleep 1; touch " + marker + "; }; go test -v ./..."
	def := load(t, cheatAgent(t, cmd, nil, cheatScript("true")))
	res := runToEnd(t, def, withSharedCache(t, BuildOptions{WorkDir: gitFixture(t, goFixture), MaxIterations: 1}))
	if res.TestBaselineMs < 1000 || res.DurationMs < res.TestBaselineMs {
		t.Fatalf("duration %d ms, test baseline %d ms: the baseline is not counted in the run's duration", res.DurationMs, res.TestBaselineMs)
	}
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	var journaled int64
	for _, ev := range events {
		if ev.Type == string(event.KindTestBaseline) {
			var b event.TestBaseline
			if err := json.Unmarshal(ev.Data, &b); err != nil {
				t.Fatal(err)
			}
			journaled += b.DurationMs
		}
	}
	if journaled != res.TestBaselineMs {
		t.Fatalf("tests.baseline journaled %d ms, the result says %d ms", journaled, res.TestBaselineMs)
	}
	rec, err := LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	resumed := runToEnd(t, def, withSharedCache(t, BuildOptions{WorkDir: rec.Start.WorkDir, Resume: rec, MaxIterations: 2}))
	if resumed.TestBaselineMs != 0 {
		t.Fatalf("the resume took a baseline of %d ms", resumed.TestBaselineMs)
	}
}
