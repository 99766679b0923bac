package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verify"
)

// dirTemplates is a real RetryTemplateSource over a prompts directory.
type dirTemplates struct{ base string }

func (d dirTemplates) ResolveRetry(_ context.Context, c1, c2, c3, edition, adaptation string) (string, bool, error) {
	name := "f_" + edition
	if adaptation != "" {
		name += "_" + adaptation
	}
	b, err := os.ReadFile(filepath.Join(d.base, c1, c2, c3, name+".md"))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

var retryStep = agentdir.Step{StepID: "complete.issue", C2: "retry", C3: "issue"}

const testFailedTemplate = `---
params:
  - failedTests
  - errorOutput
---
## Tests are failing

{{#each failedTests}}
- ` + "`{{this.name}}`" + `: {{this.error}}
{{/each}}

{{#if errorOutput}}
### Error output
{{errorOutput}}
{{else}}
(no stderr)
{{/if}}
Fix the failing tests.
`

func testFailure() event.ValidationResult {
	return event.ValidationResult{Pattern: "test-failed", Validator: "tests-pass", Params: map[string]any{
		"failedTests": []verify.TestFailure{{Name: "TestAdd", Error: `Add(1, 2) = -1, want 3 <b>&"x"`}, {Name: "TestSub<T>", Error: "a && b > c"}},
		"errorOutput": `exit status 1 & <stderr> 'quoted' "double"`,
	}}
}

func TestBuildRetryPromptFromTemplate(t *testing.T) {
	base := t.TempDir()
	write(t, base, "steps/retry/issue/f_failed_test-failed.md", testFailedTemplate)
	write(t, base, "steps/retry/issue/f_failed.md", "generic {{pattern}}")
	h := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}})
	p, err := h.BuildRetryPrompt(context.Background(), retryStep, testFailure())
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != "steps/retry/issue/f_failed_test-failed.md" || len(p.Warnings) != 0 {
		t.Fatalf("source %q warnings %v", p.Source, p.Warnings)
	}
	want := "## Tests are failing\n\n- `TestAdd`: Add(1, 2) = -1, want 3 <b>&\"x\"\n- `TestSub<T>`: a && b > c\n\n" +
		"### Error output\nexit status 1 & <stderr> 'quoted' \"double\"\nFix the failing tests.\n"
	if p.Text != want {
		t.Fatalf("text:\n%q\nwant\n%q", p.Text, want)
	}
	// No escaping of any kind survives in the output.
	for _, esc := range []string{"&lt;", "&gt;", "&amp;", "&quot;", "&#x27;", "&#39;"} {
		if strings.Contains(p.Text, esc) {
			t.Fatalf("escaped entity %s in %q", esc, p.Text)
		}
	}
}

func TestBuildRetryPromptFallbacks(t *testing.T) {
	base := t.TempDir()
	write(t, base, "steps/retry/issue/f_failed.md", "Check {{validator}} failed ({{pattern}}): {{changedFiles}} / {{untrackedFiles}}")
	h := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}})
	vr := event.ValidationResult{Pattern: "git-dirty", Validator: "git-clean",
		Params: map[string]any{"changedFiles": []string{"a.go", "b <x>.go"}, "untrackedFiles": []string{}}}
	p, err := h.BuildRetryPrompt(context.Background(), retryStep, vr)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != "steps/retry/issue/f_failed.md" || p.Text != "Check git-clean failed (git-dirty): a.go, b <x>.go / " {
		t.Fatalf("edition fallback: %+v", p)
	}
	// No template at all: the built-in prompt still carries every fact.
	h = NewRetryHandler(RetryConfig{Templates: dirTemplates{t.TempDir()}})
	p, err = h.BuildRetryPrompt(context.Background(), retryStep, testFailure())
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != SourceBuiltin {
		t.Fatalf("source = %q", p.Source)
	}
	for _, s := range []string{"test-failed", "tests-pass", "failedTests", "TestAdd", `want 3 <b>&"x"`, "TestSub<T>", "errorOutput", `<stderr> 'quoted' "double"`} {
		if !strings.Contains(p.Text, s) {
			t.Errorf("built-in prompt lacks %q:\n%s", s, p.Text)
		}
	}
	// Nil template source: built-in as well.
	p, err = NewRetryHandler(RetryConfig{}).BuildRetryPrompt(context.Background(), retryStep, vr)
	if err != nil || p.Source != SourceBuiltin || !strings.Contains(p.Text, "b <x>.go") {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestBuildRetryPromptWarnsOnUnknownParam(t *testing.T) {
	base := t.TempDir()
	write(t, base, "steps/retry/issue/f_failed_git-dirty.md", "---\nparams: [changedFiles, branch]\n---\nFiles: {{changedFiles}}; branch: [{{branchName}}]; {{#each changedFiles}}{{this}}{{../stepId}}{{/each}}")
	h := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}})
	p, err := h.BuildRetryPrompt(context.Background(), retryStep, event.ValidationResult{Pattern: "git-dirty", Validator: "git-clean",
		Params: map[string]any{"changedFiles": []string{"a.go"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Text != "Files: a.go; branch: []; a.gocomplete.issue" {
		t.Fatalf("text = %q", p.Text)
	}
	if len(p.Warnings) != 2 || !strings.Contains(p.Warnings[0], "{{branchName}}") || !strings.Contains(p.Warnings[1], `"branch"`) {
		t.Fatalf("warnings = %q", p.Warnings)
	}
}

func TestRegistryPatternOverridesBuiltin(t *testing.T) {
	base := t.TempDir()
	write(t, base, "steps/retry/issue/f_failed_test-failed.md", "builtin adaptation")
	write(t, base, "steps/retry/issue/f_broken_tests.md", "override: {{#each failedTests}}{{name}};{{/each}}")
	h := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}, Patterns: map[string]agentdir.CompletionPattern{
		"test-failed": {Edition: "broken", Adaptation: "tests", Params: []string{"failedTests"}}}})
	p, err := h.BuildRetryPrompt(context.Background(), retryStep, testFailure())
	if err != nil {
		t.Fatal(err)
	}
	if p.Text != "override: TestAdd;TestSub<T>;" || p.Source != "steps/retry/issue/f_broken_tests.md" {
		t.Fatalf("%+v", p)
	}
}

func TestBuildRetryPromptErrors(t *testing.T) {
	base := t.TempDir()
	write(t, base, "steps/retry/issue/f_failed_test-failed.md", "{{#each failedTests}}unclosed")
	h := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}})
	_, err := h.BuildRetryPrompt(context.Background(), retryStep, testFailure())
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodePromptParse || e.File != "steps/retry/issue/f_failed_test-failed.md" {
		t.Fatalf("parse error: %v", err)
	}
	_, err = h.BuildRetryPrompt(context.Background(), retryStep, event.ValidationResult{Pattern: "weird", Validator: "v"})
	if e := agenterr.From(err); e == nil || e.Pointer != "/completionPatterns/weird" || e.Hint == "" {
		t.Fatalf("unknown pattern: %v", err)
	}
	if _, err := h.BuildRetryPrompt(context.Background(), retryStep, event.ValidationResult{Valid: true}); err == nil {
		t.Fatal("retry prompt for a passing validation")
	}
	bad := dirTemplates{filepath.Join(base, "file")}
	write(t, base, "file", "not a dir")
	if _, err := NewRetryHandler(RetryConfig{Templates: bad}).BuildRetryPrompt(context.Background(), retryStep, testFailure()); err == nil {
		t.Fatal("template source error swallowed")
	}
}

func TestBuiltinPatterns(t *testing.T) {
	want := map[string][]string{
		"git-dirty": {"changedFiles", "untrackedFiles"}, "test-failed": {"failedTests", "errorOutput"},
		"type-error": {"typeErrors", "errorOutput"}, "lint-error": {"lintErrors", "errorOutput"},
		"format-error": {"unformattedFiles", "errorOutput"}, "file-not-exists": {"path", "error"},
		"protected-changed":      {"protectedFiles", "diff", "restore"},
		"tests-none-run":         {"testCommand", "baselineCount", "currentCount", "restore"},
		"tests-disappeared":      {"disappearedTests", "testCommand", "baselineCount", "currentCount", "restore"},
		"tests-skipped":          {"skippedTests", "testCommand", "baselineCount", "currentCount", "restore"},
		"tests-count-dropped":    {"testCommand", "baselineCount", "currentCount", "restore"},
		"tests-output-truncated": {"unseenTests", "testCommand", "baselineCount", "currentCount", "restore"},
		"hidden-tests-failed":    {"hiddenFailed", "hiddenTotal", "restore"},
	}
	got := verify.BuiltinPatterns()
	if len(got) != len(want) {
		t.Fatalf("got %d patterns", len(got))
	}
	for name, params := range want {
		p := got[name]
		if p.Edition != "failed" || p.Adaptation != name || strings.Join(p.Params, ",") != strings.Join(params, ",") {
			t.Errorf("%s: %+v", name, p)
		}
	}
	got["git-dirty"] = agentdir.CompletionPattern{}
	if verify.BuiltinPatterns()["git-dirty"].Edition != "failed" {
		t.Fatal("BuiltinPatterns shares state")
	}
}

// From a failed validation to the retry prompt, end to end: real go test fails → pattern test-failed →
// C3L template → prompt with the failing test's message.
func TestValidationToRetryPromptEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := goModule(t)
	t.Setenv("GOFLAGS", "-count=1")
	write(t, dir, "prompts/steps/retry/issue/f_failed_test-failed.md", testFailedTemplate)
	v := newValidator(t, verify.ValidatorConfig{Validators: registryValidators(), WorkDir: dir})
	vr, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "git-clean"}, {Validator: "tests-pass"}})
	if err != nil {
		t.Fatal(err)
	}
	// git-clean fails first (the module files are untracked).
	if vr.Pattern != "git-dirty" {
		t.Fatalf("pattern = %q", vr.Pattern)
	}
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "commit", "-qm", "wip")
	vr, err = v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "git-clean"}, {Validator: "tests-pass"}})
	if err != nil || vr.Pattern != "test-failed" {
		t.Fatalf("%+v %v", vr, err)
	}
	p, err := NewRetryHandler(RetryConfig{Templates: dirTemplates{filepath.Join(dir, "prompts")}}).BuildRetryPrompt(context.Background(), retryStep, vr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Text, "- `TestAdd`: main_test.go:7: Add(2, 2) = 0, want 4 <&>") {
		t.Fatalf("prompt:\n%s", p.Text)
	}
}

func TestRetryBudget(t *testing.T) {
	vr := event.ValidationResult{Pattern: "test-failed", Validator: "tests-pass"}
	b, err := NewRetryBudget(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		d, err := b.Next(vr)
		if err != nil || d.Action != OnFailureRetry || d.Attempt != i || d.MaxAttempts != 3 {
			t.Fatalf("failure %d: %+v %v", i, d, err)
		}
	}
	if _, err := b.Next(vr); !errors.Is(err, agenterr.ErrValidationExhausted) {
		t.Fatalf("third failure: %v", err)
	}
	b.Reset()
	if d, err := b.Next(vr); err != nil || d.Attempt != 1 {
		t.Fatalf("after reset: %+v %v", d, err)
	}

	b, _ = NewRetryBudget(&agentdir.OnFailure{Action: "retry", MaxAttempts: 1})
	if _, err := b.Next(vr); !errors.Is(err, agenterr.ErrValidationExhausted) {
		t.Fatalf("maxAttempts 1: %v", err)
	}
	b, _ = NewRetryBudget(&agentdir.OnFailure{Action: "abort"})
	if d, err := b.Next(vr); d.Action != OnFailureAbort || !errors.Is(err, agenterr.ErrValidationAborted) {
		t.Fatalf("abort: %+v %v", d, err)
	}
	b, _ = NewRetryBudget(&agentdir.OnFailure{Action: "skip"})
	for i := 0; i < 5; i++ {
		if d, err := b.Next(vr); d.Action != OnFailureSkip || err != nil {
			t.Fatalf("skip: %+v %v", d, err)
		}
	}
	if _, err := NewRetryBudget(&agentdir.OnFailure{Action: "pray"}); !errors.Is(err, agenterr.ErrConfigurationValidation) {
		t.Fatalf("bad action: %v", err)
	}
}

func TestRenderTemplateValues(t *testing.T) {
	r, err := RenderRetryTemplate(`{{n}} {{f}} {{b}} {{obj}} {{obj.k}} {{list}} {{#each items}}{{@index}}={{name}} {{/each}}{{{raw}}} {{&raw}}`, map[string]any{
		"n": 42, "f": 1.5, "b": true, "obj": map[string]any{"k": "<v>"}, "list": []any{"x", 2},
		"items": []verify.TestFailure{{Name: "a&b"}}, "raw": "<&>"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `42 1.5 true {"k":"<v>"} <v> x, 2 0=a&b <&> <&>`; r.Text != want {
		t.Fatalf("got  %q\nwant %q", r.Text, want)
	}
	if strings.Join(r.Referenced, ",") != "b,f,items,list,n,obj,raw" {
		t.Fatalf("referenced = %v", r.Referenced)
	}
	// A frontmatter-like block without a closing marker is content.
	r, err = RenderRetryTemplate("---\nnot frontmatter {{x}}", map[string]any{"x": "1"})
	if err != nil || r.Text != "---\nnot frontmatter 1" {
		t.Fatalf("%q %v", r.Text, err)
	}
	if _, err := RenderRetryTemplate("---\nparams: [\n---\nbody", nil); err == nil {
		t.Fatal("bad frontmatter accepted")
	}
	// Values are data: mustaches inside a value are not evaluated again.
	r, err = RenderRetryTemplate(`{{a}}|{{#each l}}{{this}}{{/each}}`, map[string]any{"a": "{{b}} }} {{{c}}}", "b": "X", "l": []string{"{{b}}"}})
	if err != nil || r.Text != "{{b}} }} {{{c}}}|{{b}}" {
		t.Fatalf("%q %v", r.Text, err)
	}
	// Escaped mustaches stay literal.
	r, err = RenderRetryTemplate(`\{{x}} {{x}}`, map[string]any{"x": "<1>"})
	if err != nil || r.Text != "{{x}} <1>" {
		t.Fatalf("%q %v", r.Text, err)
	}
}

func FuzzRetryTemplate(f *testing.F) {
	f.Add(testFailedTemplate, `<b>&"x"'`)
	f.Add("{{#each x}}{{this}}{{/each}}", "a")
	f.Add("{{x}", "")
	f.Add("{{> partial}}", "")
	f.Add("{{#if x}}{{else}}{{/if}}{{lookup x 'a'}}", "&amp;")
	f.Add("{{{{raw}}}}{{x}}{{{{/raw}}}}", "v")
	f.Fuzz(func(t *testing.T, tpl, value string) {
		params := map[string]any{"x": value, "failedTests": []verify.TestFailure{{Name: value, Error: value}}, "errorOutput": value}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = RenderRetryTemplate(tpl, params) // must not panic
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("rendering %q hangs", tpl)
		}
		// Whatever the value, a plain {{x}} reproduces it byte for byte
		// (invalid UTF-8 is replaced by U+FFFD: prompts are UTF-8).
		r, err := RenderRetryTemplate("[{{x}}]", params)
		if err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(value) && r.Text != "["+value+"]" {
			t.Fatalf("{{x}} with %q rendered %q", value, r.Text)
		}
		if !utf8.ValidString(r.Text) {
			t.Fatalf("invalid UTF-8 reached the prompt: %q", r.Text)
		}
	})
}

func TestFormatValidator(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "step.schema.json", `{"initial":{"type":"object","required":["status","next_action"],"additionalProperties":false,
		"properties":{"status":{"enum":["in_progress","completed"]},"next_action":{"type":"object","required":["action"],
		"properties":{"action":{"enum":["continue","complete"]},"reason":{"type":"string"}}}}}}`)
	schema, err := jsonSchemas{dir}.Schema(agentdir.SchemaRef{File: "step.schema.json", Schema: "initial"})
	if err != nil {
		t.Fatal(err)
	}
	// extract recovers the first JSON object of a text, the way
	// schema.ExtractJSON does for capstan.
	extract := func(text string) (json.RawMessage, bool) {
		i := strings.IndexByte(text, '{')
		if i < 0 {
			return nil, false
		}
		var raw json.RawMessage
		if json.NewDecoder(strings.NewReader(text[i:])).Decode(&raw) != nil {
			return nil, false
		}
		return raw, true
	}
	fv := NewFormatValidator(FormatConfig{Extract: extract})
	sum := func(so string, text ...string) *event.IterationSummary {
		return &event.IterationSummary{StructuredOutput: json.RawMessage(so), AssistantResponses: text}
	}
	r := fv.Validate(sum(`{"status":"completed","next_action":{"action":"complete"}}`), schema)
	if !r.Valid || r.Recovered {
		t.Fatalf("valid structured output: %+v", r)
	}
	r = fv.Validate(sum(`{"status":"done","next_action":{"action":"complete"}}`), schema)
	if r.Valid || !strings.Contains(r.Error, "status") || r.Extracted == nil {
		t.Fatalf("bad enum: %+v", r)
	}
	r = fv.Validate(sum("", "Here you go:\n```json\n{\"status\":\"in_progress\",\"next_action\":{\"action\":\"continue\"}}\n```"), schema)
	if !r.Valid || !r.Recovered {
		t.Fatalf("prose with JSON: %+v", r)
	}
	r = fv.Validate(sum("", "I am done!"), schema)
	if r.Valid || !strings.Contains(r.Error, "no JSON") {
		t.Fatalf("prose only: %+v", r)
	}
	if r := NewFormatValidator(FormatConfig{}).Validate(sum("", `{"status":"completed"}`), schema); r.Valid {
		t.Fatal("prose passed without an extractor")
	}
	if r := fv.Validate(sum(`{broken`), schema); r.Valid || !strings.Contains(r.Error, "not valid JSON") {
		t.Fatalf("broken structured output: %+v", r)
	}
	lines := NewFormatValidator(FormatConfig{Problems: func(err error) []string { return []string{"at /status: not allowed", "at (root): next_action missing"} }})
	if r := lines.Validate(sum(`{"status":"done"}`), schema); r.Error != "at /status: not allowed\nat (root): next_action missing" {
		t.Fatalf("problems: %q", r.Error)
	}
	bad := fv.Validate(sum(`{"status":"done"}`), schema)
	prompt := FormatRetryPrompt(bad, json.RawMessage(`{"type":"object"}`))
	if !strings.Contains(prompt, bad.Error) || !strings.Contains(prompt, "\"type\": \"object\"") {
		t.Fatalf("format retry prompt:\n%s", prompt)
	}
}

func TestFormatIterationSummary(t *testing.T) {
	s := &event.IterationSummary{Iteration: 3,
		StructuredOutput:   json.RawMessage(`{"status":"completed","next_action":{"action":"complete","reason":"All requirements satisfied"},"summary":"Wrote hello.txt"}`),
		AssistantResponses: []string{"Done.\nTASK_COMPLETE"},
		ToolsUsed:          []event.ToolUse{{Name: "Write"}, {Name: "Bash", IsError: true}},
		Errors:             []string{"tool Bash exited 1"},
	}
	got := FormatIterationSummary(s)
	for _, want := range []string{
		"## Previous Iteration Summary (Iteration 3)",
		"### Previous Iteration Decision\n**Reported Status**: completed\n**Declared Next Action**: complete (All requirements satisfied)\n",
		"### What was done:\n- Wrote hello.txt\n- Tools used: Write, Bash (failed)\n- Last response: Done. TASK_COMPLETE\n- Error: tool Bash exited 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	plain := FormatIterationSummary(&event.IterationSummary{Iteration: 1})
	if strings.Contains(plain, "Decision") || !strings.Contains(plain, "nothing recorded") {
		t.Errorf("empty summary:\n%s", plain)
	}
	if FormatIterationSummary(nil) != "" {
		t.Error("nil summary")
	}
	long := FormatIterationSummary(&event.IterationSummary{Iteration: 2, AssistantResponses: []string{strings.Repeat("é", 1000)}})
	if !strings.Contains(long, "…") || strings.Contains(long, "\uFFFD") {
		t.Error("long response not clipped on a rune boundary")
	}
}

func BenchmarkBuildRetryPrompt(b *testing.B) {
	base := b.TempDir()
	write(b, base, "steps/retry/issue/f_failed_test-failed.md", testFailedTemplate)
	h := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}})
	vr := testFailure()
	var many []verify.TestFailure
	for i := 0; i < 50; i++ {
		many = append(many, verify.TestFailure{Name: fmt.Sprintf("Test%d", i), Error: "got <1> & want \"2\""})
	}
	vr.Params["failedTests"] = many
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.BuildRetryPrompt(context.Background(), retryStep, vr); err != nil {
			b.Fatal(err)
		}
	}
}

// Every built-in pattern gets a usable prompt without any template file:
// the extracted facts (files, positions, messages) are in the text.
func TestGenericPromptForEveryBuiltinPattern(t *testing.T) {
	tsc := verify.ParseTypeErrors(readOut(t, "tsc.txt"))
	lint := verify.ParseLintErrors(readOut(t, "golangci.txt"))
	cases := []struct {
		vr   event.ValidationResult
		want []string
	}{
		{event.ValidationResult{Pattern: verify.PatternTypeError, Validator: "typecheck", Params: map[string]any{"typeErrors": tsc, "errorOutput": ""}},
			[]string{"src/index.ts:3:7: TS2322: Type 'string' is not assignable", "src/util.ts:10:15", "errorOutput\n\n(empty)"}},
		{event.ValidationResult{Pattern: verify.PatternLintError, Validator: "lint", Params: map[string]any{"lintErrors": lint}},
			[]string{"main.go:10:2: ineffectual assignment to err (ineffassign)", "Error return value of `f.Close` is not checked (errcheck)"}},
		{event.ValidationResult{Pattern: verify.PatternFormatError, Validator: "fmt", Params: map[string]any{"unformattedFiles": []string{"a.go", "b.go"}, "errorOutput": "diff <a> & b\nline 2"}},
			[]string{"- a.go\n- b.go", "```\ndiff <a> & b\nline 2\n```"}},
		{event.ValidationResult{Pattern: verify.PatternFileNotExists, Validator: "report", Params: map[string]any{"path": "out/r.json", "error": "out/r.json does not exist"}},
			[]string{"out/r.json does not exist", "A required file is missing or invalid."}},
		{event.ValidationResult{Pattern: verify.PatternGitDirty, Validator: "git-clean", Params: map[string]any{"changedFiles": []string{}, "untrackedFiles": []string{"x"}, "exit": 1, "meta": map[string]any{"k": []int{1, 2}}}},
			[]string{"changedFiles\n\n(none)", "untrackedFiles\n\n- x", "exit\n\n1", "\"k\": ["}},
		{event.ValidationResult{Pattern: verify.PatternTestFailed, Validator: "tests", Params: map[string]any{"failedTests": []verify.TestFailure{}},
			Output: &event.ValidatorOutput{Stdout: "FAIL <pkg>"}},
			[]string{"failedTests\n\n(none)"}},
		{event.ValidationResult{Pattern: verify.PatternTestFailed, Validator: "tests", Output: &event.ValidatorOutput{Stdout: "FAIL <pkg>", Stderr: "exit 2"}},
			[]string{"### output\n\n```\nFAIL <pkg>\nexit 2\n```"}},
	}
	h := NewRetryHandler(RetryConfig{})
	for _, c := range cases {
		p, err := h.BuildRetryPrompt(context.Background(), retryStep, c.vr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p.Text, "Completion check failed: "+c.vr.Pattern) || !strings.Contains(p.Text, "`"+c.vr.Validator+"`") {
			t.Errorf("%s: header missing:\n%s", c.vr.Pattern, p.Text)
		}
		for _, w := range c.want {
			if !strings.Contains(p.Text, w) {
				t.Errorf("%s: lacks %q:\n%s", c.vr.Pattern, w, p.Text)
			}
		}
	}
}

// ParseTemplate checks syntax only and reports the line and column in the
// file, frontmatter included.
func TestParseTemplate(t *testing.T) {
	if err := ParseRetryTemplate(testFailedTemplate); err != nil {
		t.Fatal(err)
	}
	err := ParseRetryTemplate("---\nparams: [failedTests]\n---\n## Tests\n\n{{#each failedTests}}\n- {{this.name}}\n")
	if err == nil || err.Error() != "line 6:1: {{#each failedTests}} is never closed" {
		t.Fatalf("err = %v", err)
	}
	if err := ParseRetryTemplate("{{#if x}}a{{/each}}"); err == nil || !strings.Contains(err.Error(), "line 1:11: {{/each}} does not close {{#if x}}") {
		t.Fatalf("err = %v", err)
	}
	if err := ParseRetryTemplate("---\nparams: [\n---\n"); err == nil || !strings.Contains(err.Error(), "frontmatter") {
		t.Fatalf("err = %v", err)
	}
}

// A retry template that multiplies its output (nested {{#each}} over a
// long list of failures) stops at its budget with PROMPT_PARSE and a hint,
// instead of building an unbounded prompt.
func TestRetryTemplateBounded(t *testing.T) {
	base := t.TempDir()
	write(t, base, "steps/retry/issue/f_failed_test-failed.md",
		"{{#each failedTests}}{{#each ../failedTests}}{{#each ../../failedTests}}{{this.error}}{{/each}}{{/each}}{{/each}}")
	vr := testFailure()
	var many []verify.TestFailure
	for i := 0; i < 300; i++ {
		many = append(many, verify.TestFailure{Name: fmt.Sprint(i), Error: "boom"})
	}
	vr.Params["failedTests"] = many
	_, err := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}}).BuildRetryPrompt(context.Background(), retryStep, vr)
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodePromptParse || !strings.Contains(e.Message, "exceeds its budget") || !strings.Contains(e.Hint, "renders too much") {
		t.Fatalf("err = %v", err)
	}
}

// A climpt failure pattern's description is often Japanese: the generic
// retry prompt upper-cases a whole first rune, never half of one, and adds
// no period after one that ends in punctuation.
func TestGenericRetryPromptNonASCIIDescription(t *testing.T) {
	vr := event.ValidationResult{Validator: "branch-pushed", Pattern: "branch-not-pushed", Params: map[string]any{"branchName": "review-42"}}
	got := GenericRetryPrompt(vr, agentdir.CompletionPattern{Description: "ブランチがリモートにプッシュされていない"})
	if !utf8.ValidString(got) || !strings.Contains(got, "\n\nブランチがリモートにプッシュされていない.\n\n") {
		t.Errorf("description mangled:\n%s", got)
	}
	got = GenericRetryPrompt(vr, agentdir.CompletionPattern{Description: "élan lost。"})
	if !strings.Contains(got, "\n\nÉlan lost。\n\n") {
		t.Errorf("first rune not upper-cased or period doubled:\n%s", got)
	}
}
