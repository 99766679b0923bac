package standard

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/pipeline"
)

var update = flag.Bool("update", false, "rewrite golden files")

func run(t *testing.T, cfg Config, request, since string, steps []testenv.GitStep) (*pipeline.AgentContext, error) {
	t.Helper()
	dir := testenv.MakeGitRepo(t, t.TempDir(), steps)
	m, err := NewManager(pipeline.Config{Options: pipeline.DefaultExecutionOptions()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Input(request, dir, since, testenv.GitHistoryNow())
	if err != nil {
		t.Fatal(err)
	}
	return m.Execute(context.Background(), in)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs from golden:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestSeedContracts(t *testing.T) {
	want := map[string][2][]string{
		IntentDetection:    {nil, {"reasoning.intents", "reasoning.entities"}},
		ReasoningStructure: {{"reasoning.intents"}, {"reasoning.hypotheses"}},
		RetrievalPlanner:   {{"reasoning.intents", "reasoning.hypotheses"}, {"retrieval.plans", "retrieval.queries"}},
		ContextSynthesizer: {{"retrieval.plans", "retrieval.queries"}, {"enrichment.facts", "enrichment.derived_knowledge"}},
		Inference:          {{"reasoning.hypotheses", "enrichment.facts"}, {"reasoning.conclusions", "reasoning.inference_chain"}},
		Validation:         {{"reasoning.intents", "reasoning.conclusions"}, {"diagnostics.validation_reports"}},
		Summarization:      {{"reasoning.conclusions", "enrichment.facts"}, {"reasoning.summary"}},
		RetrievalExecutor:  {{"retrieval.queries"}, {"retrieval.artifacts"}},
	}
	for _, cfg := range []Config{{}, {Model: &replyModel{}}} {
		agents, err := Agents(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range agents {
			w := want[a.AgentID()]
			if strings.Join(a.Preconditions(), ",") != strings.Join(w[0], ",") || strings.Join(a.Postconditions(), ",") != strings.Join(w[1], ",") {
				t.Errorf("%s: %v -> %v, want %v -> %v", a.AgentID(), a.Preconditions(), a.Postconditions(), w[0], w[1])
			}
		}
	}
}

// The whole offline pipeline on a generated repository with fixed dates.
func TestGoldenActivitySummary(t *testing.T) {
	out, err := run(t, Config{}, "summarize development activity", "7d", testenv.GitSteps())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.golden", out.String(KeySummary)+"\n")
	var facts []Fact
	_ = out.Decode(KeyFacts, &facts)
	b, _ := json.MarshalIndent(facts, "", "  ")
	golden(t, "facts.golden.json", string(b)+"\n")
	var reps []ValidationReport
	if err := out.Decode(KeyValidationReport, &reps); err != nil || !reps[0].Passed {
		t.Fatalf("validation: %+v %v", reps, err)
	}
	var runs []pipeline.AgentRun
	_ = out.Decode(pipeline.KeyAgentRuns, &runs)
	if len(runs) != 8 {
		t.Fatalf("%d runs", len(runs))
	}
	for _, r := range runs {
		if r.Status != pipeline.StatusSucceeded {
			t.Errorf("%s: %s %s", r.AgentID, r.Status, r.Error)
		}
	}
	if out.String("metadata.status") != pipeline.PipelineCompleted {
		t.Fatal(out.String("metadata.status"))
	}
}

func TestWindowFromRequestAndEmptyWindow(t *testing.T) {
	out, err := run(t, Config{}, "what happened in the last 2 days?", "", testenv.GitSteps())
	if err != nil {
		t.Fatal(err)
	}
	var qs []Query
	_ = out.Decode(KeyQueries, &qs)
	if got := qs[0].Window.Until.Sub(qs[0].Window.Since).Hours(); got != 48 {
		t.Fatalf("window %v hours", got)
	}
	// A window with no commits still yields facts, conclusions and a summary.
	out, err = run(t, Config{}, "summary", "2026-11-21", testenv.GitSteps())
	if err != nil {
		t.Fatal(err)
	}
	s := out.String(KeySummary)
	if !strings.Contains(s, "- 0 commits by 0 authors [F1, F2]") || !strings.Contains(s, "No commits were made in the window") {
		t.Fatalf("summary:\n%s", s)
	}
}

func TestNotARepository(t *testing.T) {
	m, _ := NewManager(pipeline.Config{Options: pipeline.DefaultExecutionOptions()}, Config{})
	in, _ := Input("summarize", t.TempDir(), "7d", testenv.GitHistoryNow())
	out, err := m.Execute(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "not a git repository") || out.String("metadata.status") != pipeline.PipelineStopped {
		t.Fatalf("err = %v", err)
	}
}

// replyModel answers by stage: it looks at the output schema name.
type replyModel struct {
	mu      sync.Mutex
	answers map[string]string
	seen    []string
}

func (m *replyModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, req.OutputSchemaName)
	a, ok := m.answers[req.OutputSchemaName]
	if !ok {
		return nil, errors.New("no answer for " + req.OutputSchemaName)
	}
	return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: a}, Usage: event.Usage{InputTokens: 100, OutputTokens: 20}}, nil
}

// With a model, its numbers are checked against the facts: a number no
// cited fact backs is flagged in diagnostics.
func TestModelNumbersCheckedAgainstFacts(t *testing.T) {
	m := &replyModel{answers: map[string]string{
		IntentDetection: `{"intents":[{"type":"activity_summary","confidence":0.9}],"entities":{"time_window":"7d"}}`,
		Inference: `{"conclusions":[{"id":"c1","description":"6 commits by 4 authors","confidence":0.9,"evidence":["F1","F2"]},` +
			`{"id":"c2","description":"Activity tripled, up 200% from 2 commits","confidence":0.7,"evidence":["F17"]},` +
			`{"id":"c3","description":"Bugs dominate","confidence":0.5,"evidence":["F99"]}],"inference_chain":[]}`,
		Summarization: `{"summary":"6 commits by 4 authors [F1, F2]; 30 lines added [F4]; about 42 reviews."}`,
	}}
	out, err := run(t, Config{Model: m}, "summarize development activity", "7d", testenv.GitSteps())
	if err != nil {
		t.Fatal(err)
	}
	var reps []ValidationReport
	if err := out.Decode(KeyValidationReport, &reps); err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.Passed || strings.Join(r.UnbackedNumbers, "|") != "conclusion c2: 200|summary: 42" {
		t.Fatalf("unbacked = %v", r.UnbackedNumbers)
	}
	if !strings.Contains(strings.Join(r.Violations, "|"), "conclusion c3 cites unknown fact F99") {
		t.Fatalf("violations = %v", r.Violations)
	}
	if strings.Join(m.seen, ",") != "intent_detection,inference,summarization" {
		t.Fatalf("model calls %v", m.seen)
	}
	var perf pipeline.Performance
	_ = out.Decode(pipeline.KeyPerformance, &perf)
	if perf.Usage.InputTokens != 300 {
		t.Fatalf("usage %+v", perf.Usage)
	}
}

func TestModelOutputRejected(t *testing.T) {
	m := &replyModel{answers: map[string]string{
		IntentDetection: `{"intents":[{"type":"activity_summary","confidence":1.5}],"entities":{}}`,
	}}
	out, err := run(t, Config{Model: m}, "summarize", "7d", testenv.GitSteps())
	if err == nil || !strings.Contains(err.Error(), "STAGE_OUTPUT") || out.Has(KeyIntents) {
		t.Fatalf("err = %v", err)
	}
}

func TestWindowFromText(t *testing.T) {
	cases := map[string]string{
		"last 3 days":              "3d",
		"Past 2 weeks please":      "2w",
		"in the last 12 hours":     "12h",
		"this week":                "7d",
		"since 2026-11-01":         "2026-11-01",
		"yesterday":                "1d",
		"everything":               "",
		"what happened last month": "1m",
		"the past two weeks":       "2w",
		"last 6 months":            "6m",
		"this year":                "1y",
		"last quarter":             "3m",
	}
	for in, want := range cases {
		if got, err := WindowFromText(in); got != want || err != nil {
			t.Errorf("%q -> %q, %v; want %q", in, got, err, want)
		}
	}
	// Time words it cannot read are an error, never the 7-day default.
	for _, in := range []string{"two weeks", "last 9999 days", "since Monday", "a few days ago", "over the summer months"} {
		if got, err := WindowFromText(in); err == nil {
			t.Errorf("%q -> %q, want an error", in, got)
		}
	}
}

// The command's input refuses an unreadable time phrase before running,
// unless --since decides the window.
func TestInputRefusesUnknownTimePhrase(t *testing.T) {
	if _, err := Input("summarize the last two fortnights", ".", "", testenv.GitHistoryNow()); err == nil || !strings.Contains(err.Error(), "pass --since") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Input("summarize the last two fortnights", ".", "1y", testenv.GitHistoryNow()); err != nil {
		t.Fatal(err)
	}
}

func FuzzWindowFromText(f *testing.F) {
	for _, s := range []string{"last 3 days", "since 2026-11-01", "past week", "yesterday"} {
		f.Add(s)
	}
	now := testenv.GitHistoryNow()
	f.Fuzz(func(t *testing.T, s string) {
		w, err := WindowFromText(s)
		if w == "" || err != nil {
			return
		}
		// Whatever the request says, the result is a --since value or a date ParseSince judges.
		if _, err := ParseSince(w, now); err != nil && !strings.Contains(w, "-") && w[0] != '0' {
			t.Fatalf("%q -> %q: %v", s, w, err)
		}
	})
}
