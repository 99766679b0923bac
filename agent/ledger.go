package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/verify"
)

// workDirBaselineFile is the side file, next to the run's journal, that
// holds the work dir as an iteration found it before its first call of a
// tool that is not idempotent: what the notice of an interrupted call
// compares the work dir with. It names the iteration; a later iteration
// replaces it.
const workDirBaselineFile = "workdir-baseline.json"

// workDirBaseline is the content of workDirBaselineFile.
type workDirBaseline struct {
	Iteration int                    `json:"iteration"`
	Baseline  *event.ProtectBaseline `json:"baseline,omitempty"`
	// Problem says why the work dir could not be recorded.
	Problem string `json:"problem,omitempty"`
}

// buildLedger makes the run's tool-effect ledger (llm.Ledger): it learns of
// every iteration attempt from the event stream, and a resumed run's
// ledger starts from what the journal recorded of the iteration it
// continues.
func (a *Agent) buildLedger() {
	l := &llm.Ledger{RunID: a.runID, BeforeEffect: a.recordWorkDir, Describe: a.describeWorkDir, Restored: a.opts.WorkDirRestored}
	if cp := a.opts.Checkpoint; cp != nil {
		l.AfterEffect = func(ctx context.Context, _ int) { _ = cp(context.WithoutCancel(ctx)) }
	}
	a.ledger = l
	a.emit.Subscribe(event.ConsumerFunc(func(e event.Event) {
		if e.Kind == event.KindIterationStart {
			l.Begin(e.Iteration)
		}
	}))
	if r := a.opts.Resume; r != nil && r.events != nil {
		l.Seed(r.FinishedIterations()+1, r.attemptEvents(r.FinishedIterations()+1))
	}
}

// attemptEvents returns the journal's events of iteration n's attempts:
// those of iteration n after the last event of an earlier iteration.
func (r *RunRecord) attemptEvents(n int) []journal.Event {
	from := 0
	for i, ev := range r.events {
		if ev.Iteration > 0 && ev.Iteration < n {
			from = i + 1
		}
	}
	var out []journal.Event
	for _, ev := range r.events[from:] {
		if ev.Iteration == n {
			out = append(out, ev)
		}
	}
	return out
}

// baselinePath is where the work dir baseline of the run is kept.
func (a *Agent) baselinePath() string {
	return filepath.Join(filepath.Dir(a.events.Path()), workDirBaselineFile)
}

// recordWorkDir records the work dir before iteration n's first call of a
// tool that is not idempotent, unless an earlier attempt of n did (the
// state the iteration began with is the one that counts).
func (a *Agent) recordWorkDir(_ context.Context, n int) {
	if a.events == nil {
		return
	}
	p := a.baselinePath()
	if old, err := readWorkDirBaseline(p); err == nil && old.Iteration == n {
		return
	}
	rec := workDirBaseline{Iteration: n}
	m, _ := verify.NewGlobMatcher([]string{"**"})
	b, err := verify.TakeFilesBaseline(a.workDir, m)
	if err != nil {
		rec.Problem = err.Error()
	} else {
		rec.Baseline = b
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return
	}
	// Written whole under a temporary name and renamed: a kill leaves the
	// old baseline or the new one.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
	}
}

func readWorkDirBaseline(p string) (*workDirBaseline, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var b workDirBaseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// maxDescribedChanges bounds the files an interrupted call's notice lists.
const maxDescribedChanges = 20

// describeWorkDir says what the work dir shows now compared with the
// start of iteration n (its recorded baseline): the files added, modified
// and deleted since, with line diffs of text files.
func (a *Agent) describeWorkDir(_ context.Context, n int) string {
	if a.events == nil {
		return ""
	}
	b, err := readWorkDirBaseline(a.baselinePath())
	switch {
	case err != nil || b.Iteration != n:
		return "The work dir was not recorded when this iteration began; look at it before you decide."
	case b.Baseline == nil:
		return "The work dir could not be recorded when this iteration began (" + b.Problem + "); look at it before you decide."
	}
	changes, err := verify.CheckProtected(b.Baseline, a.workDir)
	if err != nil {
		return "The work dir could not be compared with the start of this iteration (" + err.Error() + "); look at it before you decide."
	}
	if len(changes) == 0 {
		return "The work dir shows no change since this iteration began."
	}
	var s strings.Builder
	s.WriteString("Changes in the work dir since this iteration began (" + strconv.Itoa(len(changes)) + " files):")
	for i, c := range changes {
		if i == maxDescribedChanges {
			fmt.Fprintf(&s, "\n… and %d more", len(changes)-i)
			break
		}
		s.WriteString("\n" + c.String())
		if c.Diff != "" {
			s.WriteString("\n" + c.Diff)
		}
	}
	return s.String()
}
