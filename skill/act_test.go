package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/sandbox"
)

// playModel is a deterministic llm.Model that plays a fixed sequence of
// turns. Its usage is estimated from what it was sent (≈ 4 chars/token),
// so token figures follow the runtime's real context size.
type playModel struct {
	turns []playTurn
	i     int
	seen  []string // the text of the last message of every request
	// sampling records each request's temperature and seed ("unset" when nil).
	sampling []string
}

type playTurn struct {
	text  string
	calls [][2]string // name, JSON input
}

func (m *playModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	in := len(req.System)
	for _, msg := range req.Messages {
		in += len(msg.Text)
		for _, c := range msg.ToolCalls {
			in += len(c.Name) + len(c.Input)
		}
		for _, r := range msg.ToolResults {
			in += len(r.Content)
		}
	}
	last := req.Messages[len(req.Messages)-1]
	var b strings.Builder
	b.WriteString(last.Text)
	for _, r := range last.ToolResults {
		b.WriteString(r.Content)
		b.WriteString("\n")
	}
	m.seen = append(m.seen, b.String())
	smp := "unset"
	if req.Temperature != nil && req.Seed != nil {
		smp = fmt.Sprintf("t=%g seed=%d", *req.Temperature, *req.Seed)
	}
	m.sampling = append(m.sampling, smp)
	if m.i >= len(m.turns) {
		return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: "nothing more to do"},
			Usage: event.Usage{InputTokens: int64(in / 4), OutputTokens: 5}, StopReason: "end_turn"}, nil
	}
	t := m.turns[m.i]
	m.i++
	msg := event.Message{Role: event.RoleAssistant, Text: t.text}
	out := len(t.text)
	for j, c := range t.calls {
		msg.ToolCalls = append(msg.ToolCalls, event.ToolCall{ID: fmt.Sprintf("c%d_%d", m.i, j), Name: c[0], Input: json.RawMessage(c[1])})
		out += len(c[0]) + len(c[1])
	}
	return &llm.Response{Message: msg, Usage: event.Usage{InputTokens: int64(in / 4), OutputTokens: int64(out/4 + 1)}, StopReason: "tool_use"}, nil
}

func call(name, input string) [2]string { return [2]string{name, input} }

// exampleSkill copies examples/skills/status-report into a temp dir.
func exampleSkill(t testing.TB) *Skill {
	t.Helper()
	src := filepath.Join("..", "examples", "skills", "status-report")
	dst := filepath.Join(t.TempDir(), "status-report")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if rel == "build" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	sk, _, err := Load(dst, "status-report")
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

var (
	sbxOnce sync.Once
	sbx     *sandbox.Runner
)

// testSandbox returns the sandbox, or nil when this machine has none.
func testSandbox() *sandbox.Runner {
	sbxOnce.Do(func() {
		r := sandbox.New(context.Background(), sandbox.Config{})
		if r.Capabilities().Unavailable() == nil {
			sbx = r
		}
	})
	return sbx
}

const reportJSON = `{"title":"Sprint 12 status","total":4,"by_state":{"done":2,"doing":1,"todo":1},"done_ratio":0.5,"generated_by":"status-report"}`

var expectReport = []Expected{{Path: "report.json", Schema: "schemas/report.schema.json"}, {Path: "summary.md"}}

// happyTurns is the status-report flow without scripts.
func happyTurns() []playTurn {
	return []playTurn{
		{text: "Load the instructions.", calls: [][2]string{call("readSkillMd", `{}`)}},
		{text: "Look at the template.", calls: [][2]string{call("readRef", `{"path":"templates/summary.md.tmpl"}`)}},
		{text: "Write both outputs.", calls: [][2]string{
			call("writeArtifact", `{"path":"report.json","json":`+reportJSON+`}`),
			call("templateExpand", `{"template":"templates/summary.md.tmpl","output":"summary.md","data":`+reportJSON+`}`),
		}},
	}
}

type memEvents struct{ types []string }

func (m *memEvents) Emit(p event.Payload) {
	t, _ := string(p.EventKind()), any(p)
	m.types = append(m.types, t)
}

func TestActComponentSkillMdValidateWrite(t *testing.T) {
	sk := exampleSkill(t)
	ev := &memEvents{}
	m := &playModel{turns: happyTurns()}
	res, err := New(Config{Model: m, Events: ev, Seed: 7}).Run(context.Background(), sk, Input{Goal: "sprint report", Expected: expectReport})
	// Every model turn is sampled at temperature 0 with the fixed seed.
	for i, smp := range m.sampling {
		if smp != "t=0 seed=7" {
			t.Fatalf("turn %d sampled with %s", i+1, smp)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if !res.Completed || res.ExitReason != ExitValidated {
		t.Fatalf("completed %v reason %s unmet %+v validation %+v", res.Completed, res.ExitReason, res.Unmet, res.Validation)
	}
	b, err := os.ReadFile(filepath.Join(sk.Root, "build", "summary.md"))
	if err != nil || !strings.Contains(string(b), "# Sprint 12 status") || !strings.Contains(string(b), "2 done") {
		t.Errorf("summary.md = %q (%v)", b, err)
	}
	if len(res.Artifacts) != 2 || res.Artifacts[0].Handle != "act.report.json@v1" {
		t.Errorf("artifacts %+v", res.Artifacts)
	}
	if len(res.Evidence) != 4 || res.Metrics.ToolCalls != 4 || res.RemainingBudgets.MaxToolCalls != 20 {
		t.Errorf("evidence %d tool calls %d remaining %+v", len(res.Evidence), res.Metrics.ToolCalls, res.RemainingBudgets)
	}
	for _, e := range res.Evidence {
		if e.InputsDigest == "" || e.ReasonShort == "" || strings.Count(e.ReasonShort, "\n") > 4 {
			t.Errorf("evidence %+v", e)
		}
	}
	d := res.Metrics.Disclosure
	if d.L1Tokens == 0 || d.L2Tokens == 0 || d.L3Tokens == 0 || d.L3Files != 1 {
		t.Errorf("disclosure %+v", d)
	}
	if res.Metrics.Temperature != 0 || res.Metrics.Seed != 7 {
		t.Errorf("sampling %+v", res.Metrics)
	}
	evidence := 0
	for _, ty := range ev.types {
		if ty == string(event.KindSkillEvidence) {
			evidence++
		}
	}
	if evidence != 4 || ev.types[0] != string(event.KindSkillActStart) || ev.types[len(ev.types)-1] != string(event.KindSkillActEnd) {
		t.Errorf("events %v", ev.types)
	}
	if len(res.Unmet) != 0 {
		t.Errorf("unmet %+v", res.Unmet)
	}
}

func TestActReadCacheAndMemo(t *testing.T) {
	sk := exampleSkill(t)
	m := &playModel{turns: []playTurn{
		{text: "a", calls: [][2]string{call("readSkillMd", `{}`), call("readRef", `{"path":"style.md"}`)}},
		{text: "b", calls: [][2]string{call("readSkillMd", `{}`), call("readFile", `{"path":"style.md"}`)}},
		{text: "c", calls: [][2]string{call("readFile", `{"path":"nope.md"}`)}},
		{text: "d", calls: [][2]string{call("readFile", `{"path":"nope.md"}`)}},
	}}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Metrics.Disclosure
	if d.CacheHits != 2 || d.TokensSaved < d.L2Tokens {
		t.Errorf("disclosure %+v", d)
	}
	if !strings.Contains(m.seen[2], "unchanged since last read") {
		t.Errorf("second read injected again: %.300s", m.seen[2])
	}
	if strings.Contains(m.seen[2], "Step") && strings.Count(m.seen[2], "Produce two files") > 0 {
		t.Errorf("SKILL.md body injected twice")
	}
	if res.Metrics.MemoRefusals != 1 || !strings.Contains(m.seen[4], agenterr.CodeSkillRepeatedFailure) {
		t.Errorf("memo refusals %d, answer %s", res.Metrics.MemoRefusals, m.seen[4])
	}
}

func TestActToolCallBudget(t *testing.T) {
	sk := exampleSkill(t)
	var turns []playTurn
	for i := 0; i < 5; i++ {
		turns = append(turns, playTurn{text: "put", calls: [][2]string{call("blackboardPut", fmt.Sprintf(`{"key":"k%d","value":%d}`, i, i))}})
	}
	res, err := New(Config{Model: &playModel{turns: turns}}).Run(context.Background(), sk,
		Input{Goal: "g", Expected: expectReport, Budgets: Budgets{MaxToolCalls: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitReason != ExitToolCallBudget || res.Metrics.ToolCalls != 3 || res.RemainingBudgets.MaxToolCalls != 0 {
		t.Fatalf("reason %s calls %d remaining %+v", res.ExitReason, res.Metrics.ToolCalls, res.RemainingBudgets)
	}
	if !hasUnmet(res, "budget") || !hasUnmet(res, "missing_output") {
		t.Errorf("unmet %+v", res.Unmet)
	}
}

func TestActTokenBudget(t *testing.T) {
	sk := exampleSkill(t)
	res, err := New(Config{Model: &playModel{turns: happyTurns()}}).Run(context.Background(), sk,
		Input{Goal: "g", Expected: expectReport, Budgets: Budgets{TokenBudget: 400}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitReason != ExitTokenBudget || res.Completed || res.RemainingBudgets.TokenBudget != 0 {
		t.Fatalf("reason %s remaining %+v", res.ExitReason, res.RemainingBudgets)
	}
}

// cachedModel is a playModel whose provider caches the prompt: most of
// each turn's input is billed as cache reads and writes.
type cachedModel struct{ playModel }

func (m *cachedModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := m.playModel.Generate(ctx, req)
	if resp != nil {
		resp.Usage = event.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 300, CacheWriteTokens: 100}
	}
	return resp, err
}

// TestActTokenBudgetCountsCacheTokens: cache reads and writes are input
// the model was billed for; the token budget counts them, as the agent's
// runner.budgets.maxTokens does, and so do the metrics and the remaining
// budget. (Counting only uncached input and output, the run used 45 of
// an 800-token budget and went on.)
func TestActTokenBudgetCountsCacheTokens(t *testing.T) {
	sk := exampleSkill(t)
	res, err := New(Config{Model: &cachedModel{playModel{turns: happyTurns()}}}).Run(context.Background(), sk,
		Input{Goal: "g", Expected: expectReport, Budgets: Budgets{TokenBudget: 800}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitReason != ExitTokenBudget || res.Completed || res.RemainingBudgets.TokenBudget != 0 {
		t.Fatalf("reason %s remaining %+v", res.ExitReason, res.RemainingBudgets)
	}
	m := res.Metrics
	if m.ModelTurns != 2 || m.Tokens != 2*415 || m.InputTokens != 20 || m.OutputTokens != 10 || m.CacheReadTokens != 600 || m.CacheWriteTokens != 200 {
		t.Fatalf("metrics %+v", m)
	}
	if c := res.Evidence[0].Cost.Tokens; c != 415 {
		t.Errorf("first call's cost %d tokens, want the turn's 415", c)
	}
}

func TestActMicroReflectOnceThenStalled(t *testing.T) {
	sk := exampleSkill(t)
	var turns []playTurn
	for i := 0; i < 8; i++ {
		turns = append(turns, playTurn{text: "look around", calls: [][2]string{call("listFiles", fmt.Sprintf(`{"glob":"**/*.md%s"}`, strings.Repeat("", i)))}})
	}
	ev := &memEvents{}
	m := &playModel{turns: turns}
	res, err := New(Config{Model: m, Events: ev}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics.MicroReflects != 1 {
		t.Errorf("micro-reflects %d", res.Metrics.MicroReflects)
	}
	if res.ExitReason != ExitStalled && res.ExitReason != ExitCycle {
		t.Fatalf("reason %s", res.ExitReason)
	}
	reflected := false
	for _, s := range m.seen {
		if strings.Contains(s, "[micro-reflect]") && strings.Contains(s, "report.json") {
			reflected = true
		}
	}
	if !reflected {
		t.Error("the model never saw the micro-reflect note")
	}
	if !hasUnmet(res, "stalled") {
		t.Errorf("unmet %+v", res.Unmet)
	}
}

func TestActMissingReferenceFlow(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"memo/SKILL.md": "---\nname: memo\ndescription: Writes a memo.\n---\nFollow [the memo template](templates/memo.md) and write build/memo.md.\n"})
	sk, warns, err := Load(filepath.Join(dir, "memo"), "memo")
	if err != nil || !hasWarning(warns, WarnMissingReference) {
		t.Fatalf("%v %v", err, warns)
	}
	m := &playModel{turns: []playTurn{
		{text: "activate", calls: [][2]string{call("readSkillMd", `{}`)}},
		{text: "template", calls: [][2]string{call("readRef", `{"path":"templates/memo.md"}`)}},
		{text: "generate the memo myself", calls: [][2]string{call("writeArtifact", `{"path":"memo.md","content":"# Memo\n\nShip on Friday.\n"}`)}},
	}}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "memo", Expected: []Expected{{Path: "memo.md"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.seen[1], "missing_references") {
		t.Errorf("activation did not report the missing reference: %.400s", m.seen[1])
	}
	if !strings.Contains(m.seen[2], agenterr.CodeSkillMissingReference) {
		t.Errorf("readRef answer: %s", m.seen[2])
	}
	if !res.Completed {
		t.Fatalf("generation-only alternative should complete: %+v", res.Unmet)
	}
	// The same skill when the alternative fails: unmet lists the reference.
	m2 := &playModel{turns: []playTurn{{text: "activate", calls: [][2]string{call("readSkillMd", `{}`)}}}}
	sk2, _, _ := Load(filepath.Join(dir, "memo"), "memo")
	res, err = New(Config{Model: m2}).Run(context.Background(), sk2, Input{Goal: "memo", Expected: []Expected{{Path: "memo2.md"}}, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed || !hasUnmet(res, "missing_reference") {
		t.Fatalf("unmet %+v", res.Unmet)
	}
}

func TestActWriteArtifactConfinedAndBudgeted(t *testing.T) {
	sk := exampleSkill(t)
	big := strings.Repeat("x", 600*1024)
	m := &playModel{turns: []playTurn{
		{text: "w", calls: [][2]string{call("writeArtifact", `{"path":"a.txt","content":"`+big+`"}`)}},
		{text: "w", calls: [][2]string{call("writeArtifact", `{"path":"b.txt","content":"`+big+`"}`)}},
		{text: "w", calls: [][2]string{call("writeArtifact", `{"path":"a.txt","content":"v2"}`)}},
		{text: "w", calls: [][2]string{call("writeArtifact", `{"path":"../escape.txt","content":"x"}`)}},
	}}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport,
		Budgets: Budgets{DiskWriteLimitMB: 1, TokenBudget: 10_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.seen[2], agenterr.CodeBudgetExceeded) {
		t.Errorf("disk budget not enforced: %.300s", m.seen[2])
	}
	if _, err := os.Stat(filepath.Join(sk.Root, "build", "b.txt")); err == nil {
		t.Error("b.txt written beyond the disk budget")
	}
	if res.ExitReason != ExitSandboxViolation {
		t.Errorf("reason %s", res.ExitReason)
	}
	if _, err := os.Stat(filepath.Join(sk.Root, "escape.txt")); err == nil {
		t.Error("escape.txt written outside build/")
	}
	var handles []string
	for _, a := range res.Artifacts {
		handles = append(handles, a.Handle)
	}
	if strings.Join(handles, ",") != "act.a.txt@v2" {
		t.Errorf("artifacts %v", handles)
	}
}

func TestActTemplateErrors(t *testing.T) {
	sk := exampleSkill(t)
	writeTree(t, sk.Root, map[string]string{"templates/loop.tmpl": `{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`})
	m := &playModel{turns: []playTurn{
		{text: "missing key", calls: [][2]string{call("templateExpand", `{"template":"templates/summary.md.tmpl","data":{"title":"x"}}`)}},
		{text: "recursion", calls: [][2]string{call("templateExpand", `{"template":"templates/loop.tmpl","data":{}}`)}},
	}}
	_, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.seen[1], `"ok":false`) || !strings.Contains(m.seen[2], `"ok":false`) {
		t.Errorf("template failures not reported: %s / %.300s", m.seen[1], m.seen[2])
	}
}

// TestActSecondRunCheaper is an end-to-end test: a second run of the
// same skill with the same request uses fewer tokens and tool calls.
func TestActSecondRunCheaper(t *testing.T) {
	sk := exampleSkill(t)
	first, err := New(Config{Model: &playModel{turns: happyTurns()}}).Run(context.Background(), sk, Input{Goal: "sprint report", Expected: expectReport})
	if err != nil || !first.Completed {
		t.Fatalf("first run: %v %+v", err, first)
	}
	second, err := New(Config{Model: &playModel{turns: happyTurns()}}).Run(context.Background(), sk, Input{Goal: "sprint report", Expected: expectReport})
	if err != nil || !second.Completed {
		t.Fatalf("second run: %v %+v", err, second)
	}
	t.Logf("first: %d tokens, %d tool calls; second: %d tokens, %d tool calls (%s)",
		first.Metrics.Tokens, first.Metrics.ToolCalls, second.Metrics.Tokens, second.Metrics.ToolCalls, second.ExitReason)
	if second.Metrics.Tokens >= first.Metrics.Tokens || second.Metrics.ToolCalls >= first.Metrics.ToolCalls {
		t.Fatalf("second run not cheaper")
	}
	if second.ExitReason != ExitUpToDate || len(second.Artifacts) != 2 {
		t.Errorf("reason %s artifacts %+v", second.ExitReason, second.Artifacts)
	}
	// A different request does not get the earlier outputs for free.
	other, err := New(Config{Model: &playModel{turns: happyTurns()[:1]}}).Run(context.Background(), sk, Input{Goal: "another goal", Expected: expectReport})
	if err != nil || other.Completed || !strings.Contains(strings.Join(other.Validation.Outputs[0].Errors, " "), "stale") {
		t.Fatalf("stale outputs accepted for a different goal: %v %+v", err, other.Validation)
	}
	// A change to the skill invalidates the record.
	writeTree(t, sk.Root, map[string]string{"style.md": "# changed\n"})
	third, err := New(Config{Model: &playModel{turns: happyTurns()}}).Run(context.Background(), sk, Input{Goal: "sprint report", Expected: expectReport})
	if err != nil || third.ExitReason == ExitUpToDate || third.Metrics.ToolCalls == 0 {
		t.Fatalf("stale record reused: %v %s", err, third.ExitReason)
	}
	// So does tampering with an output.
	os.WriteFile(filepath.Join(sk.Root, "build", "summary.md"), []byte("tampered {{.x}}\n"), 0o644)
	fourth, err := New(Config{Model: &playModel{}}).Run(context.Background(), sk, Input{Goal: "sprint report", Expected: expectReport})
	if err != nil || fourth.ExitReason == ExitUpToDate || fourth.Completed {
		t.Fatalf("tampered output accepted: %v %s", err, fourth.ExitReason)
	}
}

func hasUnmet(res *ActResult, kind string) bool {
	for _, u := range res.Unmet {
		if u.Kind == kind {
			return true
		}
	}
	return false
}

func TestActLongSkillMdDisclosedInParts(t *testing.T) {
	dir := t.TempDir()
	var body strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&body, "Instruction line %d with some words to make it longer.\n", i)
	}
	writeTree(t, dir, map[string]string{"big/SKILL.md": "---\nname: big\ndescription: Big one.\n---\n" + body.String()})
	sk, warns, err := Load(filepath.Join(dir, "big"), "big")
	if err != nil || !hasWarning(warns, WarnBodyLong) {
		t.Fatal(err, warns)
	}
	m := &playModel{turns: []playTurn{
		{text: "activate", calls: [][2]string{call("readSkillMd", `{}`)}},
		{text: "more", calls: [][2]string{call("readFile", `{"path":"SKILL.md","offset":2500,"limit":10}`)}},
	}}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: []Expected{{Path: "x.md"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.seen[1], `"truncated":true`) || !strings.Contains(m.seen[1], "Read more with readFile") || len(m.seen[1]) > 2*maxInjectChars {
		t.Errorf("L2 not bounded: %d bytes", len(m.seen[1]))
	}
	if res.Metrics.Disclosure.L2Tokens > maxInjectChars/4+500 { // the first part plus the 10-line window
		t.Errorf("L2 tokens %d", res.Metrics.Disclosure.L2Tokens)
	}
	if !strings.Contains(m.seen[2], "Instruction line 2497") || !strings.Contains(m.seen[2], "next_offset") {
		t.Errorf("window read: %.300s", m.seen[2])
	}
}

func TestTemplateOutputCapped(t *testing.T) {
	data := map[string]any{"a": make([]any, 200)}
	_, err := ExpandTemplate(context.Background(), "t", `{{range .a}}{{range $.a}}{{range $.a}}XXXXXXXXXXXXXXXXXXXXXXXXXX{{end}}{{end}}{{end}}`, data)
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err %v", err)
	}
}

func FuzzReferences(f *testing.F) {
	root := f.TempDir()
	writeTree(f, root, map[string]string{"SKILL.md": "x", "a/b.md": "x", "scripts/run.py": "x"})
	for _, s := range []string{"see [x](../../etc/passwd.md)", "`run.py` and A/B.MD", "[l](./a/b.md#frag)", "python scripts/run.py --x", "[x](/abs.md)", "..%2f..%2fx.md"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		sk := &Skill{ID: "s", Root: root, File: "SKILL.md", Body: body}
		refs, _ := resolveReferences(sk, nil)
		for _, r := range refs {
			if strings.HasPrefix(r.Path, "../") || r.Path == ".." || strings.HasPrefix(r.Path, "/") {
				t.Fatalf("reference %+v escapes", r)
			}
			if r.Exists {
				if _, err := os.Stat(filepath.Join(root, r.Path)); err != nil {
					t.Fatalf("reference %+v claims to exist", r)
				}
			}
		}
	})
}

type failingModel struct {
	inner *playModel
	after int
}

func (f *failingModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if f.after == 0 {
		return nil, agenterr.New(agenterr.CodeSdkRateLimit, agenterr.LayerSDKBridge, true, "slow down")
	}
	f.after--
	return f.inner.Generate(ctx, req)
}

func TestActModelErrorKeepsEvidence(t *testing.T) {
	sk := exampleSkill(t)
	m := &failingModel{inner: &playModel{turns: happyTurns()}, after: 1}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport})
	if !errors.Is(err, agenterr.ErrSdkRateLimit) {
		t.Fatalf("err %v", err)
	}
	if res == nil || res.ExitReason != ExitModelError || res.Error == nil || res.Error.Code != agenterr.CodeSdkRateLimit || !res.Error.Recoverable {
		t.Fatalf("%+v", res)
	}
	if len(res.Evidence) != 1 || res.Metrics.ModelTurns != 1 || res.Completed {
		t.Errorf("evidence %d turns %d", len(res.Evidence), res.Metrics.ModelTurns)
	}
}

func TestActFailedWriteLeavesNoPartialFile(t *testing.T) {
	sk := exampleSkill(t)
	os.MkdirAll(filepath.Join(sk.Root, "build", "report.json"), 0o755) // a directory where the file should go
	m := &playModel{turns: []playTurn{{text: "w", calls: [][2]string{call("writeArtifact", `{"path":"report.json","json":`+reportJSON+`}`)}}}}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.seen[1], `"ok":false`) || len(res.Artifacts) != 0 {
		t.Errorf("write into a directory succeeded: %s", m.seen[1])
	}
	entries, _ := os.ReadDir(filepath.Join(sk.Root, "build"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestActCanceled(t *testing.T) {
	sk := exampleSkill(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := New(Config{Model: &playModel{turns: happyTurns()}}).Run(ctx, sk, Input{Goal: "g", Expected: expectReport})
	if err != nil || res.ExitReason != ExitCanceled || res.Metrics.ModelTurns != 0 {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestActBadExpectedPath(t *testing.T) {
	sk := exampleSkill(t)
	for _, p := range []string{"../x", "/etc/passwd", ""} {
		_, err := New(Config{Model: &playModel{}}).Run(context.Background(), sk, Input{Goal: "g", Expected: []Expected{{Path: p}}})
		if agenterr.CodeOf(err) != agenterr.CodeToolInput {
			t.Errorf("%q: %v", p, err)
		}
	}
}

func TestActDisclosureDegradesWhenBudgetLow(t *testing.T) {
	sk := exampleSkill(t)
	var big strings.Builder
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&big, "## Section %d\n\nFirst sentence of section %d. More detail that is not needed.\n\n", i, i)
	}
	writeTree(t, sk.Root, map[string]string{"reference.md": big.String()})
	m := &playModel{turns: []playTurn{
		{text: "read", calls: [][2]string{call("readRef", `{"path":"reference.md"}`)}},
		{text: "window", calls: [][2]string{call("readFile", `{"path":"reference.md","offset":0,"limit":5}`)}},
	}}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport, Budgets: Budgets{TokenBudget: 8000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics.Disclosure.Degraded != 1 || !strings.Contains(m.seen[1], "token budget low") {
		t.Fatalf("not degraded: %+v %.300s", res.Metrics.Disclosure, m.seen[1])
	}
	if strings.Contains(m.seen[1], "More detail that is not needed") {
		t.Error("full text sent despite the low budget")
	}
	if !strings.Contains(m.seen[2], "Section 0") || strings.Contains(m.seen[2], "unchanged") {
		t.Errorf("windowed read after a degraded read: %.300s", m.seen[2])
	}
	// With the default budget the same read is complete.
	m2 := &playModel{turns: []playTurn{{text: "read", calls: [][2]string{call("readRef", `{"path":"reference.md"}`)}}}}
	res, _ = New(Config{Model: m2}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport, Fresh: true})
	if res.Metrics.Disclosure.Degraded != 0 || !strings.Contains(m2.seen[1], "More detail that is not needed") {
		t.Errorf("degraded with a full budget")
	}
}

// A template the model wrote itself (writeArtifact into build/, then
// templateExpand) cannot crash capstan or keep running: a doubling loop
// stops at the 1 MiB cap, nested ranges at the step budget, and both come
// back as tool errors while the run goes on.
func TestActModelWrittenTemplatesBounded(t *testing.T) {
	sk := exampleSkill(t)
	doubling := `{{$s := \"xxxxxxxxxxxxxxxx\"}}{{range 64}}{{$s = printf \"%s%s\" $s $s}}{{end}}{{$s}}`
	nested := `{{range 100000}}{{range 100000}}{{range 100000}}{{end}}{{end}}{{end}}`
	m := &playModel{turns: []playTurn{
		{text: "write", calls: [][2]string{
			call("writeArtifact", `{"path":"double.tmpl","content":"`+doubling+`"}`),
			call("writeArtifact", `{"path":"nested.tmpl","content":"`+nested+`"}`)}},
		{text: "expand doubling", calls: [][2]string{call("templateExpand", `{"template":"build/double.tmpl","output":"big.md"}`)}},
		{text: "expand nested", calls: [][2]string{call("templateExpand", `{"template":"build/nested.tmpl"}`)}},
	}}
	before := runtime.NumGoroutine()
	_, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.seen[1], `"ok":true`) {
		t.Fatalf("templates not written: %.300s", m.seen[1])
	}
	for i, want := range []string{"larger than 1048576 bytes", "more than 1000000 steps"} {
		if got := m.seen[2+i]; !strings.Contains(got, `"ok":false`) || !strings.Contains(got, want) {
			t.Errorf("expansion %d: want %q in %.400s", i, want, got)
		}
	}
	if _, err := os.Stat(filepath.Join(sk.Root, "build", "big.md")); err == nil {
		t.Error("an over-budget expansion left its output")
	}
	// A goroutine that is ending (the run's, or one an earlier test left)
	// is waited for rather than counted.
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines %d → %d: an expansion is still running", before, after)
	}
}
