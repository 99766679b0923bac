package workflow

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.FakeGHMain() // the fake gh is this test binary
	os.Exit(m.Run())
}

// scripted answers each agent's dispatches with the next of its outcomes.
type scripted struct {
	runs  map[string][]event.WorkflowOutcome
	calls []Dispatch
}

func (s *scripted) Dispatch(_ context.Context, d Dispatch) (event.WorkflowOutcome, error) {
	s.calls = append(s.calls, d)
	q := s.runs[d.Agent.ID]
	if len(q) == 0 {
		return event.WorkflowOutcome{}, fmt.Errorf("no run scripted for %s", d.Agent.ID)
	}
	s.runs[d.Agent.ID] = q[1:]
	return q[0], nil
}

type recorder struct{ events []string }

func (r *recorder) Emit(p event.Payload) {
	t := string(p.EventKind())
	r.events = append(r.events, t)
}

func ghFor(t *testing.T, f *testenv.FakeGH) *github.CLI {
	return &github.CLI{Path: filepath.Join(f.Dir, "gh"), Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir()}
}

func loadIssues(t *testing.T) *Workflow {
	w, res := Load("testdata/issues.json")
	if !res.Valid() {
		t.Fatal(res.Errors())
	}
	return w
}

// TestIssueDrivenFromConsiderToDone drives one issue through the three
// agents of climpt's workflow and checks the gh calls against what
// climpt's orchestrator makes for the same outcomes (tettuan/climpt
// 4af87ad, agents/orchestrator/):
//   - label-resolver.ts:25-56: the actionable phase of lowest priority;
//   - phase-transition.ts:23-55: validator verdict → outputPhases, a
//     transformer's success → outputPhase;
//   - phase-transition.ts:68-99: remove every workflow label the issue
//     has (the prioritizer's order:N too on a terminal move) and add the
//     first label mapping to the target;
//   - orchestrator.ts:560-632: add the labels, then remove, then the
//     handoff comment (handoff-manager.ts:26-44 looks the template up as
//     <agent><Outcome>);
//   - orchestrator.ts:546-551, 646-682: close when the target is
//     terminal and closeOnComplete (and closeCondition) hold.
func TestIssueDrivenFromConsiderToDone(t *testing.T) {
	f := testenv.InstallFakeGH(t, testenv.GHState{Issues: map[string]*testenv.GHIssue{
		"7": {Title: "t", Labels: []string{"kind:consider", "order:1"}, State: "open"},
	}})
	d := &scripted{runs: map[string][]event.WorkflowOutcome{
		"considerer": {{Success: true, Verdict: "handoff-detail", Handoff: map[string]any{"final_summary": "needs a spec", "verdict": "handoff-detail"}}},
		"detailer":   {{Success: true, Verdict: "handoff-impl", Handoff: map[string]any{"detail_summary": "do X then Y"}}},
		"iterator":   {{Success: true}},
	}}
	rec := &recorder{}
	r := &Runner{Workflow: loadIssues(t), Issues: ghFor(t, f), Dispatch: d, Events: rec}
	res := r.RunIssue(context.Background(), 7)
	if res.Status != StatusCompleted || res.FinalPhase != "done" || !res.Closed || res.Cycles != 3 {
		t.Fatalf("result %+v", res)
	}
	want := []string{
		"issue edit 7 --add-label kind:detail",
		"issue edit 7 --remove-label kind:consider",
		"issue comment 7 --body ## Specification Requested\n\nneeds a spec",
		"issue edit 7 --add-label kind:impl",
		"issue edit 7 --remove-label kind:detail",
		"issue comment 7 --body ## Implementation Spec\n\ndo X then Y",
		"issue edit 7 --add-label done",
		"issue edit 7 --remove-label order:1 --remove-label kind:impl", // in the order gh lists the labels
		"issue close 7",
	}
	if got := f.Writes(t); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("gh writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	st := f.State(t).Issues["7"]
	if st.State != "closed" || strings.Join(st.Labels, ",") != "done" {
		t.Fatalf("issue %+v", st)
	}
	// The orchestrator supplies issue to every agent.
	for _, c := range d.calls {
		if c.Params["issue"] != "7" {
			t.Fatalf("dispatch %s params %v", c.Agent.ID, c.Params)
		}
	}
	var phases []string
	for _, h := range res.History {
		phases = append(phases, h.From+">"+h.To+":"+h.Outcome)
	}
	if got := strings.Join(phases, " "); got != "consider-pending>detail-pending:handoff-detail detail-pending>impl-pending:handoff-impl impl-pending>done:success" {
		t.Fatalf("history %s", got)
	}
}

// climpt's own template keys (considererHandoffDetail) match no lookup,
// so no comment is posted on those moves (handoff-manager.ts:30-41: the
// outcome's first letter is upper-cased, the hyphen kept).
func TestClimptSpelledTemplatesPostNothing(t *testing.T) {
	raw, _ := os.ReadFile("testdata/issues.json")
	s := strings.NewReplacer(`"considererHandoff-detail"`, `"considererHandoffDetail"`, `"detailerHandoff-impl"`, `"detailerHandoffImpl"`).Replace(string(raw))
	w, res := Parse("wf.json", []byte(s))
	if !res.Valid() {
		t.Fatal(res.Errors())
	}
	f := testenv.InstallFakeGH(t, testenv.GHState{Issues: map[string]*testenv.GHIssue{"3": {Labels: []string{"kind:consider"}, State: "open"}}})
	d := &scripted{runs: map[string][]event.WorkflowOutcome{
		"considerer": {{Success: true, Verdict: "handoff-detail"}},
		"detailer":   {{Success: true, Verdict: "blocked"}},
	}}
	r := &Runner{Workflow: w, Issues: ghFor(t, f), Dispatch: d}
	out := r.RunIssue(context.Background(), 3)
	if out.Status != StatusBlocked || out.FinalPhase != "blocked" {
		t.Fatalf("%+v", out)
	}
	for _, c := range f.Writes(t) {
		if strings.HasPrefix(c, "issue comment") {
			t.Fatalf("a comment was posted: %s", c)
		}
	}
}

// A close that fails undoes the move last step first and leaves one
// marker comment per issue and cycle (orchestrator.ts:646-668,
// transaction-scope.ts:116-169): a second failed attempt finds the
// marker and posts no second one.
func TestFailedCloseIsCompensatedOnce(t *testing.T) {
	f := testenv.InstallFakeGH(t, testenv.GHState{
		Issues: map[string]*testenv.GHIssue{"5": {Labels: []string{"kind:impl", "order:2"}, State: "open"}},
		Fail:   []string{"issue close 5", "issue close 5"},
	})
	w := loadIssues(t)
	for attempt := 1; attempt <= 2; attempt++ {
		d := &scripted{runs: map[string][]event.WorkflowOutcome{"iterator": {{Success: true}}}}
		rec := &recorder{}
		r := &Runner{Workflow: w, Issues: ghFor(t, f), Dispatch: d, Events: rec}
		res := r.RunIssue(context.Background(), 5)
		if res.Status != StatusBlocked || res.FinalPhase != "impl-pending" || res.Closed || !strings.Contains(res.Error, "undone") {
			t.Fatalf("attempt %d: %+v", attempt, res)
		}
		if !contains(rec.events, string(event.KindWorkflowCompensation)) {
			t.Fatalf("no compensation journaled: %v", rec.events)
		}
	}
	st := f.State(t).Issues["5"]
	if strings.Join(st.Labels, ",") != "kind:impl,order:2" || st.State != "open" {
		t.Fatalf("labels not restored: %+v", st)
	}
	markers := 0
	for _, c := range st.Comments {
		if strings.Contains(c, CompensationMarker(5, 1)) {
			markers++
		}
	}
	if markers != 1 || len(st.Comments) != 1 {
		t.Fatalf("comments %q", st.Comments)
	}
	wantFirst := []string{
		"issue edit 5 --add-label done",
		"issue edit 5 --remove-label kind:impl --remove-label order:2",
		"issue close 5",
		// Compensations, last first: the marker, the handoff step's label
		// restore, the removed labels back, the added label off.
		"issue comment 5 --body capstan could not close",
		"issue edit 5 --remove-label done --add-label kind:impl --add-label order:2",
		"issue edit 5 --add-label kind:impl --add-label order:2",
		"issue edit 5 --remove-label done",
	}
	got := f.Writes(t)
	for i, w := range wantFirst {
		if i >= len(got) || !strings.HasPrefix(got[i], w) {
			t.Fatalf("write %d = %q, want %q\nall:\n%s", i, at(got, i), w, strings.Join(got, "\n"))
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

func TestLimitsStopTheLoop(t *testing.T) {
	wf := `{"version":"1","phases":{"review":{"type":"actionable","priority":1,"agent":"rev"},"ok":{"type":"terminal"}},
"labelMapping":{"review":"review","ok":"ok"},"agents":{"rev":{"role":"validator","outputPhases":{"again":"review","ok":"ok"},"fallbackPhase":"review"}},
"rules":{"maxCycles":%d,"cycleDelayMs":0,"maxConsecutivePhases":%d}}`
	for _, c := range []struct {
		cycles, repeat int
		status         string
		moves          int
	}{
		{cycles: 2, repeat: 0, status: StatusCycleExceeded, moves: 2},
		{cycles: 9, repeat: 3, status: StatusPhaseRepetition, moves: 3},
	} {
		w, res := Parse("wf.json", []byte(fmt.Sprintf(wf, c.cycles, c.repeat)))
		if !res.Valid() {
			t.Fatal(res.Errors())
		}
		l := &Local{Dir: t.TempDir()}
		writeLocalIssue(t, l, 1, "review")
		again := event.WorkflowOutcome{Success: true, Verdict: "again"}
		d := &scripted{runs: map[string][]event.WorkflowOutcome{"rev": {again, again, again, again, again}}}
		out := (&Runner{Workflow: w, Issues: l, Dispatch: d}).RunIssue(context.Background(), 1)
		if out.Status != c.status || out.Cycles != c.moves || len(d.calls) != c.moves {
			t.Fatalf("%+v: %+v (%d dispatches)", c, out, len(d.calls))
		}
	}
}

func writeLocalIssue(t *testing.T, l *Local, n int, labels ...string) {
	t.Helper()
	b := fmt.Sprintf(`{"number":%d,"title":"issue %d","labels":[%s],"state":"open","assignees":[],"milestone":null}`, n, n, quoteAll(labels))
	if err := writeAtomic(l.metaPath(n), []byte(b)); err != nil {
		t.Fatal(err)
	}
}

func quoteAll(s []string) string {
	var q []string
	for _, x := range s {
		q = append(q, fmt.Sprintf("%q", x))
	}
	return strings.Join(q, ",")
}

func TestDryRunPlansWithoutChanges(t *testing.T) {
	l := &Local{Dir: t.TempDir()}
	writeLocalIssue(t, l, 4, "kind:consider", "order:1")
	rec := &recorder{}
	d := &scripted{runs: map[string][]event.WorkflowOutcome{}}
	r := &Runner{Workflow: loadIssues(t), Issues: l, Dispatch: d, Events: rec, DryRun: true}
	if _, err := r.SyncLabels(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := r.RunIssue(context.Background(), 4)
	if out.Status != StatusDryRun || len(d.calls) != 0 || !contains(rec.events, string(event.KindWorkflowPlan)) {
		t.Fatalf("%+v %v", out, rec.events)
	}
	plan := r.plan(4, r.Workflow.Phases["consider-pending"], r.Workflow.Agents["considerer"], []string{"kind:consider", "order:1"})
	var done event.WorkflowPlanMove
	for _, m := range plan.Moves {
		if m.Outcome == "done" {
			done = m
		}
	}
	if !done.Close || strings.Join(done.Remove, ",") != "kind:consider,order:1" || strings.Join(done.Add, ",") != "done" {
		t.Fatalf("plan %+v", plan)
	}
	// The named outcomes first, in order; the fallback's line, which
	// takes every other outcome, last.
	var order []string
	for _, m := range plan.Moves {
		order = append(order, m.Outcome)
	}
	if got := strings.Join(order, "|"); got != "done|handoff-detail|"+anyOtherOutcome {
		t.Fatalf("plan's outcomes in the order %s", got)
	}
	if text := PlanText(plan); !strings.HasPrefix(text[len(text)-1], "  any other outcome → blocked:") {
		t.Fatalf("plan text:\n%s", strings.Join(text, "\n"))
	}
	if labels, _ := l.Labels(context.Background(), 4); strings.Join(labels, ",") != "kind:consider,order:1" {
		t.Fatalf("labels changed: %v", labels)
	}
	if _, err := os.Stat(filepath.Join(l.Dir, "labels.json")); !os.IsNotExist(err) {
		t.Fatalf("dry run wrote labels.json: %v", err)
	}
}

func TestValidatorWithoutVerdictFails(t *testing.T) {
	l := &Local{Dir: t.TempDir()}
	writeLocalIssue(t, l, 2, "kind:detail")
	d := &scripted{runs: map[string][]event.WorkflowOutcome{"detailer": {{Success: false, Reason: "max_iterations", RunID: "r1"}}}}
	out := (&Runner{Workflow: loadIssues(t), Issues: l, Dispatch: d}).RunIssue(context.Background(), 2)
	if out.Status != StatusFailed || !strings.Contains(out.Error, "must end with a verdict") {
		t.Fatalf("%+v", out)
	}
}

func TestBatchOrderAndLabelSync(t *testing.T) {
	l := &Local{Dir: t.TempDir()}
	writeLocalIssue(t, l, 1, "kind:impl", "order:2")
	writeLocalIssue(t, l, 2, "kind:impl", "order:1")
	writeLocalIssue(t, l, 3, "done")
	writeLocalIssue(t, l, 4, "kind:impl")
	d := &scripted{runs: map[string][]event.WorkflowOutcome{"iterator": {{Success: true}, {Success: true}, {Success: true}}}}
	r := &Runner{Workflow: loadIssues(t), Issues: l, Dispatch: d}
	syncs, err := r.SyncLabels(context.Background())
	if err != nil || len(syncs) != 7 || syncs[0].Action != "created" {
		t.Fatalf("%v %+v", err, syncs)
	}
	again, _ := r.SyncLabels(context.Background())
	if again[0].Action != "unchanged" {
		t.Fatalf("%+v", again)
	}
	res, err := r.RunBatch(context.Background(), Criteria{})
	if err != nil || res.Status != StatusCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	var order []int
	for _, ir := range res.Issues {
		order = append(order, ir.Issue)
	}
	if fmt.Sprint(order) != "[2 1 4]" || fmt.Sprint(res.Skipped) != "[3]" {
		t.Fatalf("order %v skipped %v", order, res.Skipped)
	}
}

func TestHandoffPayloadReachesLaterDispatches(t *testing.T) {
	wf := `{"version":"1","phases":{"rev":{"type":"actionable","priority":1,"agent":"reviewer"},"merge":{"type":"actionable","priority":2,"agent":"merger"},"done":{"type":"terminal"},"stop":{"type":"blocking"}},
"labelMapping":{"rev":"rev","merge":"merge","done":"done","stop":"stop"},
"agents":{"reviewer":{"role":"validator","outputPhases":{"approved":"merge"},"fallbackPhase":"stop"},"merger":{"role":"validator","outputPhases":{"merged":"done"},"fallbackPhase":"stop"}},
"rules":{"cycleDelayMs":0},
"handoffs":[{"id":"verdict","when":{"fromAgent":"reviewer","outcome":"approved"},"emit":{"type":"verdict","schemaRef":"v1","path":"out/${payload.prNumber}.json"},
 "payloadFrom":{"prNumber":"$.agent.result.pr_number","verdict":"'approved'","verdictPath":"out/${payload.prNumber}.json"},"persistPayloadTo":"subjectStore"}]}`
	w, res := Parse("wf.json", []byte(wf))
	if !res.Valid() {
		t.Fatal(res.Errors())
	}
	wd := t.TempDir()
	l := &Local{Dir: t.TempDir()}
	writeLocalIssue(t, l, 9, "rev")
	d := &scripted{runs: map[string][]event.WorkflowOutcome{
		"reviewer": {{Success: true, Verdict: "approved", Handoff: map[string]any{"pr_number": 17}}},
		"merger":   {{Success: true, Verdict: "merged"}},
	}}
	r := &Runner{Workflow: w, Issues: l, Dispatch: d, Handoffs: &HandoffEmitter{Workflow: w, WorkDir: wd, StoreDir: l.Dir}}
	out := r.RunIssue(context.Background(), 9)
	if out.Status != StatusCompleted {
		t.Fatalf("%+v", out)
	}
	b, err := os.ReadFile(filepath.Join(wd, "out", "17.json"))
	if err != nil || !strings.Contains(string(b), `"verdictPath": "out/17.json"`) {
		t.Fatalf("%v %s", err, b)
	}
	if p := d.calls[1].Params; p["prNumber"] != "17" || p["verdict"] != "approved" || p["issue"] != "9" {
		t.Fatalf("merger params %v", p)
	}
}

// An issue the local store does not hold fails with the path it looked
// for and the issues the store has; an issue none of whose labels names
// a phase is blocked with its labels and the labels that would start it.
func TestIssueMissingOrInNoPhaseSaysWhatToDo(t *testing.T) {
	l := &Local{Dir: t.TempDir()}
	writeLocalIssue(t, l, 4, "bug")
	writeLocalIssue(t, l, 9)
	r := &Runner{Workflow: loadIssues(t), Issues: l, Dispatch: &scripted{}, Events: &recorder{}}
	out := r.RunIssue(context.Background(), 2)
	want := "no issue 2 in " + l.Dir + ": " + filepath.Join(l.Dir, "2", "meta.json") + " does not exist (the store holds #4 #9)"
	if out.Status != StatusFailed || out.Error != want {
		t.Fatalf("missing issue: %s: %s\nwant %s", out.Status, out.Error, want)
	}
	starts := "give it the label of the phase to start in: kind:impl (phase impl-pending), kind:detail (phase detail-pending), kind:consider (phase consider-pending)"
	for n, has := range map[int]string{4: "its labels are bug", 9: "it has no labels"} {
		out := r.RunIssue(context.Background(), n)
		if want := "no label of the issue names a phase of the workflow (" + has + "); " + starts; out.Status != StatusBlocked || out.Error != want {
			t.Fatalf("issue %d: %s: %s\nwant %s", n, out.Status, out.Error, want)
		}
	}
	if out := r.RunIssue(context.Background(), 1); !strings.Contains(out.Error, "(the store holds #4 #9)") {
		t.Fatal(out.Error)
	}
	empty := &Runner{Workflow: r.Workflow, Issues: &Local{Dir: t.TempDir()}, Dispatch: &scripted{}, Events: &recorder{}}
	if out := empty.RunIssue(context.Background(), 1); !strings.HasSuffix(out.Error, "(the store holds no issues)") {
		t.Fatal(out.Error)
	}
}

// The local store's files are text files: each ends with a newline, as
// the ones a person writes do.
func TestLocalStoreFilesEndWithANewline(t *testing.T) {
	l := &Local{Dir: t.TempDir()}
	writeLocalIssue(t, l, 3, "kind:impl")
	ctx := context.Background()
	if err := l.EditLabels(ctx, 3, []string{"kind:impl"}, []string{"done"}); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateLabel(ctx, LabelSpec{Name: "done", Color: "0e8a16"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{l.metaPath(3), l.labelsPath()} {
		if b, err := os.ReadFile(p); err != nil || !strings.HasSuffix(string(b), "}\n") {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
}
