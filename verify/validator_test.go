package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/schema"
)

// The work dirs of the validator tests, the same in verify's and
// verdict's tests.
var (
	run      = testenv.MustRun
	write    = testenv.WriteFile
	gitRepo  = testenv.TinyGitRepo
	goModule = testenv.TinyGoModule
)

func registryValidators() map[string]agentdir.Validator {
	return map[string]agentdir.Validator{
		"git-clean": {Type: "command", Command: "git status --porcelain", SuccessWhen: "empty", FailurePattern: "git-dirty",
			ExtractParams: map[string]string{"changedFiles": "parseChangedFiles", "untrackedFiles": "parseUntrackedFiles"}},
		"tests-pass": {Type: "command", Command: "go test ./...", SuccessWhen: "exitCode:0", FailurePattern: "test-failed",
			ExtractParams: map[string]string{"failedTests": "parseTestOutput", "errorOutput": "stderr"}},
	}
}

func TestGitCleanValidatorOnRealRepo(t *testing.T) {
	dir := gitRepo(t)
	v := newValidator(t, ValidatorConfig{Validators: registryValidators(), WorkDir: dir})
	conds := []agentdir.CompletionCondition{{Validator: "git-clean"}}
	r, err := v.Validate(context.Background(), conds)
	if err != nil || !r.Valid {
		t.Fatalf("clean repo: %+v %v", r, err)
	}
	write(t, dir, "main.go", "package main\n\nfunc main() {}\n")
	write(t, dir, "notes <&>.md", "new\n")
	write(t, dir, "café\t\"q\".txt", "quoted by git\n")
	run(t, dir, "git", "mv", "old name.txt", "new name.txt")
	r, err = v.Validate(context.Background(), conds)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || r.Pattern != "git-dirty" || r.Validator != "git-clean" {
		t.Fatalf("dirty repo: %+v", r)
	}
	changed := r.Params["changedFiles"].([]string)
	untracked := r.Params["untrackedFiles"].([]string)
	if strings.Join(changed, "|") != "main.go|new name.txt" && strings.Join(changed, "|") != "new name.txt|main.go" {
		t.Errorf("changedFiles = %q", changed)
	}
	if len(untracked) != 2 || untracked[0] != "café\t\"q\".txt" || untracked[1] != "notes <&>.md" {
		t.Errorf("untrackedFiles = %q", untracked)
	}
}

func TestEmptyNeedsExitZero(t *testing.T) {
	// git status outside a repository prints nothing on stdout: that must
	// not count as "clean".
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	v := newValidator(t, ValidatorConfig{Validators: registryValidators(), WorkDir: dir})
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "git-clean"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid {
		t.Fatalf("git status failing with empty stdout passed: %+v", r.Output)
	}
}

func TestTestsPassValidatorRunsRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := goModule(t)
	t.Setenv("GOFLAGS", "-count=1")
	v := newValidator(t, ValidatorConfig{Validators: registryValidators(), WorkDir: dir})
	conds := []agentdir.CompletionCondition{{Validator: "tests-pass"}, {Validator: "git-clean"}}
	r, err := v.Validate(context.Background(), conds)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || r.Pattern != "test-failed" || r.Output.ExitCode == 0 {
		t.Fatalf("failing test: %+v", r)
	}
	// Stops at the first failure: git-clean (dirty too) did not run.
	if strings.Join(r.Checked, ",") != "tests-pass" {
		t.Fatalf("checked = %v", r.Checked)
	}
	ft := r.Params["failedTests"].([]TestFailure)
	if len(ft) != 1 || ft[0].Name != "TestAdd" || !strings.Contains(ft[0].Error, "Add(2, 2) = 0, want 4 <&>") {
		t.Fatalf("failedTests = %+v", ft)
	}
	write(t, dir, "main.go", "package main\n\nfunc Add(a, b int) int { return a + b }\n\nfunc main() {}\n")
	r, err = v.Validate(context.Background(), conds)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || r.Pattern != "git-dirty" || strings.Join(r.Checked, ",") != "tests-pass,git-clean" {
		t.Fatalf("tests pass, repo dirty: %+v", r)
	}
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "commit", "-qm", "fix")
	if r, err = v.Validate(context.Background(), conds); err != nil || !r.Valid {
		t.Fatalf("all good: %+v %v", r, err)
	}
}

func TestParamsAreShellQuoted(t *testing.T) {
	dir := t.TempDir()
	home := t.TempDir()
	write(t, home, "precious", "keep me")
	t.Setenv("HOME", home)
	vals := map[string]agentdir.Validator{
		"echo": {Type: "command", Command: "printf '%s' ${value}", SuccessWhen: "contains:never", FailurePattern: "p",
			ExtractParams: map[string]string{"out": "stdout"}},
	}
	v := newValidator(t, ValidatorConfig{Validators: vals, WorkDir: dir, Patterns: map[string]agentdir.CompletionPattern{"p": {Edition: "failed"}}})
	for _, payload := range []string{"$(rm -rf ~)", "`rm -rf ~`", "'; rm -rf ~; echo '", "a b\nc", `"$HOME"`, "${HOME}", "x'y\"z\\"} {
		raw, _ := json.Marshal(payload)
		r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "echo",
			Params: map[string]json.RawMessage{"value": raw}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Params["out"]; got != payload {
			t.Errorf("payload %q came back as %q", payload, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, "precious")); err != nil || string(b) != "keep me" {
		t.Fatalf("payload escaped the quoting: %v", err)
	}
	// Non-string params are their JSON text; unknown placeholders are left for the shell.
	if got := Interpolate("x ${n} ${HOME} ${list}", map[string]any{"n": 3.0, "list": []any{"a", "b"}}); got != `x '3' ${HOME} '["a","b"]'` {
		t.Errorf("Interpolate = %q", got)
	}
}

func TestSuccessWhen(t *testing.T) {
	cases := []struct {
		rule string
		out  event.ValidatorOutput
		want bool
	}{
		{"", event.ValidatorOutput{ExitCode: 0}, true},
		{"", event.ValidatorOutput{ExitCode: 1}, false},
		{"exitCode:2", event.ValidatorOutput{ExitCode: 2}, true},
		{"exitCode:2", event.ValidatorOutput{ExitCode: 0}, false},
		{"empty", event.ValidatorOutput{Stdout: " \n\t"}, true},
		{"empty", event.ValidatorOutput{Stdout: "?? x"}, false},
		{"empty", event.ValidatorOutput{Stdout: "", ExitCode: 128}, false},
		{"contains:ok", event.ValidatorOutput{Stdout: "all ok"}, true},
		{"contains:ok", event.ValidatorOutput{Stderr: "ok"}, false},
		{"matches:^v\\d+$", event.ValidatorOutput{Stdout: "v12"}, true},
		{"matches:^v\\d+$", event.ValidatorOutput{Stdout: "v12x"}, false},
		{"", event.ValidatorOutput{ExitCode: 0, TimedOut: true}, false},
	}
	for _, c := range cases {
		w, err := ParseSuccessWhen(c.rule)
		if err != nil {
			t.Fatalf("%q: %v", c.rule, err)
		}
		if got := w.Met(c.out); got != c.want {
			t.Errorf("%q on %+v = %v", c.rule, c.out, got)
		}
	}
	for _, bad := range []string{"exitCode:", "exitCode:x", "exitCode:-1", "exitCode:256", "contains:", "matches:", "matches:(", "zero", "Empty", "equals:x", "exitcode:0"} {
		if _, err := ParseSuccessWhen(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzSuccessWhen(f *testing.F) {
	for _, s := range []string{"", "empty", "exitCode:0", "exitCode:3", "contains:ok", "matches:^a+$", "matches:(", "exitCode: 7"} {
		f.Add(s, "out", 0)
	}
	f.Fuzz(func(t *testing.T, rule, stdout string, code int) {
		w, err := ParseSuccessWhen(rule)
		if err != nil {
			return
		}
		if w.Kind == "matches" && w.Regexp == nil {
			t.Fatal("matches without regexp")
		}
		out := event.ValidatorOutput{Stdout: stdout, ExitCode: code}
		got := w.Met(out)
		out.TimedOut = true
		if w.Met(out) {
			t.Fatal("timed-out output met a rule")
		}
		if w.Kind == "empty" && got && (code != 0 || strings.TrimSpace(stdout) != "") {
			t.Fatalf("empty met on %q/%d", stdout, code)
		}
	})
}

func TestRunCommandTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	// A background grandchild keeps appending; after the timeout it must be gone.
	cmd := `(while true; do echo tick >> ticks; sleep 0.05; done) & echo started; wait`
	start := time.Now()
	out, err := RunCommand(context.Background(), CommandSpec{Command: cmd, Dir: dir, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !out.TimedOut || !strings.Contains(out.Stdout, "started") || !strings.Contains(out.Stderr, "timeout") {
		t.Fatalf("out = %+v", out)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("timeout not enforced promptly: %v", time.Since(start))
	}
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, "ticks"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	before := size()
	time.Sleep(300 * time.Millisecond)
	if after := size(); after != before {
		t.Fatalf("grandchild still running after timeout (%d -> %d bytes)", before, after)
	}
}

func TestRunCommandOutputCap(t *testing.T) {
	out, err := RunCommand(context.Background(), CommandSpec{Command: `head -c 5000 /dev/zero | tr '\0' a; head -c 100 /dev/zero | tr '\0' b >&2`,
		Dir: t.TempDir(), OutputCap: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// One line without a break: the first and the last 500 bytes of it.
	want := strings.Repeat("a", 500) + "\n[capstan: output truncated, 4000 bytes omitted here]\n" + strings.Repeat("a", 500)
	if !out.Truncated || out.Stdout != want {
		t.Fatalf("stdout %d bytes, truncated=%v: %q", len(out.Stdout), out.Truncated, out.Stdout)
	}
	if out.Stderr != strings.Repeat("b", 100) {
		t.Fatalf("stderr = %q", out.Stderr)
	}
}

func TestRunCommandCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err := RunCommand(ctx, CommandSpec{Command: "sleep 10", Dir: t.TempDir()})
	if !errors.Is(err, agenterr.ErrCanceled) {
		t.Fatalf("err = %v", err)
	}
}

// TestValidatorDefinitionRules: NewCompletionValidator checks every
// validator definition and reports every broken rule at once, each with
// its problem code, the registry file, the JSON pointer and a hint.
func TestValidatorDefinitionRules(t *testing.T) {
	vals := map[string]agentdir.Validator{
		"no-cmd":      {Type: "command", FailurePattern: "p"},
		"bad-when":    {Type: "command", Command: "true", SuccessWhen: "sometimes", FailurePattern: "p"},
		"bad-ex":      {Type: "command", Command: "false", FailurePattern: "p", ExtractParams: map[string]string{"x/y": "parseMagic"}},
		"bad-type":    {Type: "http", FailurePattern: "p"},
		"no-handler":  {Type: "custom", FailurePattern: "p"},
		"no-custom":   {Type: "custom", Handler: "nope", FailurePattern: "p"},
		"no-path":     {Type: "file", FailurePattern: "file-not-exists"},
		"escape":      {Type: "file", Path: "../outside.txt", FailurePattern: "file-not-exists"},
		"abs":         {Type: "file", Path: "/etc/passwd", FailurePattern: "file-not-exists"},
		"no-source":   {Type: "file", Path: "out.json", Schema: &agentdir.SchemaRef{File: "a.json", Schema: "x"}, FailurePattern: "p"},
		"no-pattern":  {Type: "command", Command: "true", FailurePattern: "ghost"},
		"cmd-path":    {Type: "command", Command: "true", Path: "x", FailurePattern: "p"},
		"file-when":   {Type: "file", Path: "x", SuccessWhen: "empty", TimeoutSeconds: 3, FailurePattern: "p"},
		"all-correct": {Type: "command", Command: "true", SuccessWhen: "empty", FailurePattern: "git-dirty"},
	}
	_, err := NewCompletionValidator(ValidatorConfig{Validators: vals, WorkDir: t.TempDir(),
		Patterns: map[string]agentdir.CompletionPattern{"p": {Edition: "failed"}}})
	want := map[string]string{ // pointer → problem code
		"/validators/no-cmd/command":            "SR-VALIDATOR-FIELD",
		"/validators/bad-when/successWhen":      "SR-SUCCESS-WHEN",
		"/validators/bad-ex/extractParams/x~1y": "SR-EXTRACTOR-UNKNOWN",
		"/validators/bad-type/type":             agenterr.CodeConfigurationValidation,
		"/validators/no-handler/handler":        "SR-VALIDATOR-FIELD",
		"/validators/no-custom/handler":         agenterr.CodeConfigurationValidation,
		"/validators/no-path/path":              "SR-VALIDATOR-FIELD",
		"/validators/escape/path":               "SR-PATH-OUTSIDE",
		"/validators/abs/path":                  "SR-PATH-OUTSIDE",
		"/validators/no-source/schema":          agenterr.CodeConfigurationValidation,
		"/validators/no-pattern/failurePattern": "SR-PATTERN-UNKNOWN",
		"/validators/cmd-path/path":             "SR-IGNORED-FIELD",
		"/validators/file-when/successWhen":     "SR-IGNORED-FIELD",
		"/validators/file-when/timeoutSeconds":  "SR-IGNORED-FIELD",
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("want every broken rule at once, got %v", err)
	}
	for _, e := range j.Unwrap() {
		p := agentdir.ProblemFromError(e)
		if want[p.Pointer] != p.Code || p.File != "steps_registry.json" || p.Hint == "" || !errors.Is(e, agenterr.ErrConfigurationValidation) {
			t.Errorf("unexpected %+v", p)
		}
		delete(want, p.Pointer)
	}
	for ptr, code := range want {
		t.Errorf("%s not reported at %s", code, ptr)
	}
}

// TestValidatorRunErrors: what only a run can know — an unknown validator
// named by a condition, a path whose {param} values leave the work dir or
// make it empty — is an error when the validator runs.
func TestValidatorRunErrors(t *testing.T) {
	vals := map[string]agentdir.Validator{
		"param-path": {Type: "file", Path: "${p}", FailurePattern: "file-not-exists"},
	}
	dir := t.TempDir()
	v := newValidator(t, ValidatorConfig{Validators: vals, WorkDir: dir})
	for _, tc := range []struct {
		cond agentdir.CompletionCondition
		code string
	}{
		{agentdir.CompletionCondition{Validator: "missing"}, agenterr.CodeValidator},
		{agentdir.CompletionCondition{Validator: "param-path", Params: map[string]json.RawMessage{"p": json.RawMessage(`"../outside"`)}}, agenterr.CodePathEscape},
		{agentdir.CompletionCondition{Validator: "param-path", Params: map[string]json.RawMessage{"p": json.RawMessage(`"/etc/passwd"`)}}, agenterr.CodePathEscape},
		{agentdir.CompletionCondition{Validator: "param-path", Params: map[string]json.RawMessage{"p": json.RawMessage(`""`)}}, agenterr.CodeValidator},
	} {
		_, err := v.Validate(context.Background(), []agentdir.CompletionCondition{tc.cond})
		e := agenterr.From(err)
		if e == nil || e.Code != tc.code || e.File != "steps_registry.json" || e.Pointer == "" || e.Hint == "" {
			t.Errorf("%s %s: err = %v (want %s with file, pointer, hint)", tc.cond.Validator, tc.cond.Params["p"], err, tc.code)
		}
	}
}

// newValidator is NewCompletionValidator for a configuration the test
// knows to be valid.
func newValidator(t testing.TB, cfg ValidatorConfig) *CompletionValidator {
	t.Helper()
	v, err := NewCompletionValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestFileValidatorSymlinkEscape(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write(t, outside, "secret.json", "{}")
	if err := os.Symlink(filepath.Join(outside, "secret.json"), filepath.Join(dir, "link.json")); err != nil {
		t.Skip(err)
	}
	v := newValidator(t, ValidatorConfig{WorkDir: dir, Validators: map[string]agentdir.Validator{
		"f": {Type: "file", Path: "link.json", FailurePattern: "file-not-exists"}}})
	_, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "f"}})
	if !errors.Is(err, agenterr.ErrPathEscape) {
		t.Fatalf("err = %v", err)
	}
}

// jsonSchemas is a real SchemaSource: schema files under dir compiled by
// the schema package, the schema name a key of the file.
type jsonSchemas struct{ dir string }

func (j jsonSchemas) Schema(ref agentdir.SchemaRef) (SchemaValidator, error) {
	data, err := os.ReadFile(filepath.Join(j.dir, ref.File))
	if err != nil {
		return nil, err
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, err
	}
	raw, ok := file[ref.Schema]
	if !ok {
		return nil, fmt.Errorf("%s has no schema %q", ref.File, ref.Schema)
	}
	s, err := schema.CompileSource(schema.Source{Raw: raw, URL: "mem:///" + ref.File})
	if err != nil {
		return nil, err
	}
	return checked{s}, nil
}

type checked struct{ s *schema.Schema }

func (c checked) Validate(v any) error { return c.s.Check(v) }

func TestFileValidatorWithSchema(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "schemas/report.schema.json", `{"report":{"type":"object","required":["title","score"],
		"properties":{"title":{"type":"string"},"score":{"type":"number","minimum":0}}}}`)
	vals := map[string]agentdir.Validator{
		"report": {Type: "file", Path: "out/${name}.json", Schema: &agentdir.SchemaRef{File: "report.schema.json", Schema: "report"},
			FailurePattern: "file-not-exists", ExtractParams: map[string]string{"details": "stderr"}},
		"exists": {Type: "file", Path: "out", FailurePattern: "file-not-exists"},
	}
	v := newValidator(t, ValidatorConfig{Validators: vals, WorkDir: dir, Schemas: jsonSchemas{filepath.Join(dir, "schemas")}})
	cond := []agentdir.CompletionCondition{{Validator: "report", Params: map[string]json.RawMessage{"name": json.RawMessage(`"r1"`)}}}

	r, err := v.Validate(context.Background(), cond)
	if err != nil || r.Valid || r.Params["path"] != "out/r1.json" || !strings.Contains(r.Params["details"].(string), "does not exist") {
		t.Fatalf("missing file: %+v %v", r, err)
	}
	if r, _ := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "exists"}}); r.Valid {
		t.Fatal("missing dir passed")
	}
	write(t, dir, "out/r1.json", `{"title":"x","score":-1}`)
	r, err = v.Validate(context.Background(), cond)
	if err != nil || r.Valid || !strings.Contains(r.Params["error"].(string), "does not match schema") {
		t.Fatalf("schema violation: %+v %v", r, err)
	}
	write(t, dir, "out/r1.json", `{"title":"x",`)
	if r, _ = v.Validate(context.Background(), cond); r.Valid || !strings.Contains(r.Params["error"].(string), "not valid json") {
		t.Fatalf("broken json: %+v", r)
	}
	write(t, dir, "out/r1.json", `{"title":"x","score":3}`)
	if r, err = v.Validate(context.Background(), cond); err != nil || !r.Valid {
		t.Fatalf("valid file: %+v %v", r, err)
	}
	if r, _ := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "exists"}}); !r.Valid {
		t.Fatal("existing dir failed")
	}
}

// wordCount is a custom validator: a file must have at least min words.
type wordCount struct{}

func (wordCount) Validate(_ context.Context, req CustomRequest) (CustomResult, error) {
	b, err := os.ReadFile(filepath.Join(req.WorkDir, req.Params["file"].(string)))
	if err != nil {
		return CustomResult{}, err
	}
	n := len(strings.Fields(string(b)))
	min := int(req.Params["min"].(float64))
	return CustomResult{Valid: n >= min, Output: event.ValidatorOutput{Stdout: string(b)}, Params: map[string]any{"words": n}}, nil
}

func TestCustomValidator(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "essay.txt", "one two three")
	var events recorder
	v := newValidator(t, ValidatorConfig{WorkDir: dir, Custom: map[string]CustomValidator{"test-wordcount": wordCount{}}, Emitter: &events, Patterns: map[string]agentdir.CompletionPattern{"too-short": {Edition: "failed"}}, Validators: map[string]agentdir.Validator{
		"long-enough": {Type: "custom", Handler: "test-wordcount", FailurePattern: "too-short", ExtractParams: map[string]string{"text": "stdout"}}}})
	cond := func(min string) []agentdir.CompletionCondition {
		return []agentdir.CompletionCondition{{Validator: "long-enough", Params: map[string]json.RawMessage{
			"file": json.RawMessage(`"essay.txt"`), "min": json.RawMessage(min)}}}
	}
	r, err := v.Validate(context.Background(), cond("5"))
	if err != nil || r.Valid || r.Pattern != "too-short" || r.Params["words"] != 3 || r.Params["text"] != "one two three" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err = v.Validate(context.Background(), cond("2")); err != nil || !r.Valid {
		t.Fatalf("%+v %v", r, err)
	}
	if len(events.events) != 2 || events.events[0].typ != "validator.result" {
		t.Fatalf("events = %+v", events.events)
	}
	var ev event.ValidatorEvent
	json.Unmarshal(events.events[0].data, &ev)
	if ev.Validator != "long-enough" || ev.Valid || ev.Pattern != "too-short" {
		t.Fatalf("event = %+v", ev)
	}
	// A custom validator that errors is a VALIDATOR_ERROR.
	_, err = v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "long-enough", Params: map[string]json.RawMessage{
		"file": json.RawMessage(`"missing.txt"`), "min": json.RawMessage("1")}}})
	if !errors.Is(err, agenterr.ErrValidator) {
		t.Fatalf("err = %v", err)
	}
}

type recorded struct {
	typ  string
	data json.RawMessage
}

type recorder struct {
	mu     sync.Mutex
	events []recorded
}

func (r *recorder) Emit(p event.Payload) {
	typ, data := string(p.EventKind()), any(p)
	b, _ := json.Marshal(data)
	r.mu.Lock()
	r.events = append(r.events, recorded{typ, b})
	r.mu.Unlock()
}

func BenchmarkGitStatusValidator(b *testing.B) {
	dir := gitRepo(b)
	for i := 0; i < 20; i++ {
		write(b, dir, filepath.Join("pkg", string(rune('a'+i))+".go"), "package pkg\n")
	}
	v := newValidator(b, ValidatorConfig{Validators: registryValidators(), WorkDir: dir})
	conds := []agentdir.CompletionCondition{{Validator: "git-clean"}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := v.Validate(context.Background(), conds)
		if err != nil || r.Valid {
			b.Fatal(r, err)
		}
	}
}

func TestFileValidatorRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "schemas/s.json", `{"any":{}}`)
	if err := syscallMkfifo(filepath.Join(dir, "pipe.json")); err != nil {
		t.Skip(err)
	}
	v := newValidator(t, ValidatorConfig{WorkDir: dir, Schemas: jsonSchemas{filepath.Join(dir, "schemas")},
		Validators: map[string]agentdir.Validator{"f": {Type: "file", Path: "pipe.json", FailurePattern: "file-not-exists",
			Schema: &agentdir.SchemaRef{File: "s.json", Schema: "any"}}}})
	done := make(chan event.ValidationResult, 1)
	go func() {
		r, _ := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "f"}})
		done <- r
	}()
	select {
	case r := <-done:
		if r.Valid || !strings.Contains(r.Params["error"].(string), "not a regular file") {
			t.Fatalf("%+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("file validator blocked on a FIFO the model created")
	}
}

func TestRunCommandDetachedChildDoesNotHang(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	// A child that leaves the process group and keeps stdout open must not
	// keep the validator waiting beyond the pipe grace period.
	start := time.Now()
	out, err := RunCommand(context.Background(), CommandSpec{Command: "setsid sleep 8 & echo hi", Dir: t.TempDir(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Stdout, "hi") || time.Since(start) > 6*time.Second {
		t.Fatalf("out %+v after %v", out, time.Since(start))
	}
}

// FuzzShellQuote checks with a real shell that a quoted value is one
// literal word.
func FuzzShellQuote(f *testing.F) {
	for _, s := range []string{"$(id)", "`id`", "a'b", "'", `\`, "\n", "${HOME}", "-n", "a b", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.ContainsRune(v, 0) {
			return // cannot be passed to a process
		}
		out, err := exec.Command("sh", "-c", "printf '%s' "+ShellQuote(v)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != v {
			t.Fatalf("%q came back as %q", v, out)
		}
	})
}
