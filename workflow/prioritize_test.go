package workflow

import (
	"context"
	"github.com/capstan-dev/capstan/event"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writingAgent stands in for the prioritizer agent: it writes its answer
// into priorities.json, as a model would.
type writingAgent struct {
	path, answer string
	dispatched   []string
}

func (w *writingAgent) Dispatch(_ context.Context, d Dispatch) (event.WorkflowOutcome, error) {
	w.dispatched = append(w.dispatched, d.Agent.ID)
	if w.answer != "" {
		if err := os.WriteFile(w.path, []byte(w.answer), 0o644); err != nil {
			return event.WorkflowOutcome{}, err
		}
	}
	return event.WorkflowOutcome{Success: true, RunID: "r1"}, nil
}

// The prioritizer's answer is the model's: an issue outside the batch, a
// label outside prioritizer.labels (without defaultLabel), a duplicate,
// an unknown field or no file at all refuse the whole answer before any
// label changes; a good one replaces each issue's priority label.
func TestPrioritizeChecksTheAgentsAnswer(t *testing.T) {
	wf, res := Load("testdata/issues.json")
	if !res.Valid() {
		t.Fatal(res.Problems())
	}
	for _, c := range []struct{ answer, want string }{
		{`[{"issue": 99, "priority": "order:1"}]`, "not in the batch"},
		{`[{"issue": 1, "priority": "urgent"}]`, "not one of prioritizer.labels"},
		{`[{"issue": 1, "priority": "order:1"}, {"issue": 1, "priority": "order:2"}]`, "twice"},
		{`[{"issue": 1, "priority": "order:1", "labels": ["done"]}]`, "unknown field"},
		{`{"issue": 1}`, "want a JSON array"},
		{"", "did not write"},
		{`[{"issue": 2, "priority": "order:1"}, {"issue": 1, "priority": "order:2"}]`, ""},
	} {
		dir := t.TempDir()
		for n, labels := range map[int]string{1: `["kind:consider", "order:1"]`, 2: `["kind:impl"]`, 3: `["kind:detail"]`} {
			meta := `{"number": ` + strconv.Itoa(n) + `, "labels": ` + labels + `, "state": "open"}`
			if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(n)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(n), "meta.json"), []byte(meta), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// A stale answer of an earlier run is never read.
		if err := os.WriteFile(filepath.Join(dir, PrioritiesFile), []byte(`[{"issue": 3, "priority": "order:1"}]`), 0o644); err != nil {
			t.Fatal(err)
		}
		agent := &writingAgent{path: filepath.Join(dir, PrioritiesFile), answer: c.answer}
		is := &Local{Dir: dir}
		r := &Runner{Workflow: wf, Issues: is, Dispatch: agent}
		pr, err := r.Prioritize(context.Background(), Criteria{}, dir)
		list, _ := os.ReadFile(filepath.Join(dir, IssueListFile))
		if string(list) != "[1,2,3]" || strings.Join(agent.dispatched, ",") != "triager" {
			t.Fatalf("issue list %s, dispatched %v", list, agent.dispatched)
		}
		l1, _ := is.Labels(context.Background(), 1)
		l2, _ := is.Labels(context.Background(), 2)
		l3, _ := is.Labels(context.Background(), 3)
		got := strings.Join(l1, ",") + " " + strings.Join(l2, ",") + " " + strings.Join(l3, ",")
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) || got != "kind:consider,order:1 kind:impl kind:detail" {
				t.Errorf("%s: err %v, labels %s", c.answer, err, got)
			}
			continue
		}
		if err != nil || got != "kind:consider,order:2 kind:impl,order:1 kind:detail" || len(pr.Changed) != 2 {
			t.Errorf("good answer: err %v, labels %s, %+v", err, got, pr)
		}
		// Ordered by the new labels, a batch runs issue 2 first.
		listed, _ := is.List(context.Background(), Criteria{})
		if q, _ := wf.Order(listed); len(q) != 3 || q[0] != 2 || q[1] != 1 {
			t.Errorf("queue %v", q)
		}
	}
}
