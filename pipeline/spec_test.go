package pipeline

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

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/llm"
)

func testStandard(id string) (ReasoningAgent, error) {
	switch id {
	case "intent_detection":
		return fn(id, nil, []string{"reasoning.intents"}, setAll(map[string]any{"reasoning.intents": []string{"x"}})), nil
	case "summarization":
		return fn(id, []string{"reasoning.intents"}, []string{"reasoning.summary"}, setAll(map[string]any{"reasoning.summary": "s"})), nil
	}
	return nil, errors.New("unknown standard agent")
}

func buildSpec(t *testing.T, src string, opts BuildOptions) (*Manager, error) {
	t.Helper()
	s, err := ParseSpec("p.yaml", []byte(src))
	if err != nil {
		return nil, err
	}
	if opts.Standard == nil {
		opts.Standard = testStandard
	}
	return s.Build(context.Background(), opts)
}

func TestSpecParseAndRun(t *testing.T) {
	src := `version: 1
options: {fail_on_violation: false}
max_parallel: 2
inputs: [request]
keys:
  - {name: custom.labels, type: array, reducer: append}
stages:
  - id: intent_detection
    timeout: 5s
  - id: label_a
    kind: func
    use: labeler
    preconditions: [reasoning.intents]
    postconditions: [custom.labels]
    retry: {max_retries: 2, backoff: 1ms, max_backoff: 5ms}
  - id: label_b
    kind: func
    use: labeler
    preconditions: [reasoning.intents]
    postconditions: [custom.labels]
  - id: llm_note
    kind: model
    preconditions: [custom.labels]
    postconditions: [custom.note]
    prompt: "Labels: {{json custom.labels}} for {{input.request}}"
    schema: {type: object, required: [note], properties: {note: {type: string, maxLength: 20}}}
`
	s, err := ParseSpec("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.Options.FailOnViolation || !s.Options.ValidateContract || !s.Options.TrackPerformance || s.Stages[0].Timeout != 5*time.Second ||
		s.Stages[1].Retry != (RetryPolicy{MaxRetries: 2, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}) || s.Stages[1].Line != 10 {
		t.Fatalf("spec = %+v", s)
	}
	model := &replyModel{replies: []llm.Response{text(`{"note":"two labels"}`)}}
	m, err := s.Build(context.Background(), BuildOptions{Standard: testStandard, DefaultModel: model,
		Funcs: map[string]func(context.Context, *AgentContext) error{
			"labeler": func(_ context.Context, ac *AgentContext) error {
				return ac.Set("custom.labels", []string{ac.AgentID()})
			},
		}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Execute(context.Background(), input(t, "request", "go"))
	if err != nil {
		t.Fatal(err)
	}
	if got := decode[[]string](t, out, "custom.labels"); strings.Join(got, ",") != "label_a,label_b" {
		t.Fatalf("labels %v", got)
	}
	if out.String("custom.note") != "two labels" || model.reqs[0].Messages[0].Text != `Labels: [
  "label_a",
  "label_b"
] for go` {
		t.Fatalf("note %q prompt %q", out.String("custom.note"), model.reqs[0].Messages[0].Text)
	}
}

// Bad files are rejected with file:line:column and a hint.
func TestSpecErrors(t *testing.T) {
	cases := []struct {
		src, want string
		line      int
	}{
		{"version: 2\nstages: [{id: a}]\n", "unsupported pipeline version 2", 1},
		{"version: 1\nstages: []\n", "no stages", 0},
		{"version: 1\nstages:\n  - id: a\n    timeout: 5000\n", "timeout 5000 is not a positive duration", 4},
		{"version: 1\nstages:\n  - id: a\n    timeout: -1s\n", "not a positive duration", 4},
		{"version: 1\nstages:\n  - id: a\n    colour: red\n", "unknown field \"colour\"", 4},
		{"version: 1\nstages:\n  - id: a\n  - id: a\n", "declared twice", 4},
		{"version: 1\nstages:\n  - id: a\n    kind: shell\n", "unknown kind \"shell\"", 4},
		{"version: 1\nstages:\n  - id: a\n    kind: model\n", "has no postconditions", 3},
		{"version: 1\nstages:\n  - id: a\n    kind: func\n    postconditions: [nons]\n", "has no namespace", 5},
		{"version: 1\nstages:\n  - id: a\n    preconditions: [x.y]\n", "fixed contracts", 3},
		{"version: 1\nstages:\n  - id: a\n    kind: agent\n    postconditions: [x.y]\n", "without dir", 3},
		{"version: 1\nstages:\n  - id: a\n    retry: {max_retries: 99}\n", "outside 0..10", 4},
		{"version: 1\nstages:\n  - id: a\n    retry: {backoff: soon}\n", "not a positive duration", 4},
		{"version: 1\nkeys: [{name: k.x, type: list}]\nstages: [{id: a}]\n", "unknown type", 2},
		{"version: 1\nkeys: [{name: k.x, schema: {type: 7}}]\nstages: [{id: a}]\n", "k.x", 2},
		{"version: 1\nstages:\n  - id: 'a b'\n", "agent id", 3},
		{"version: [\n", "", 0},
		{"version: 1\nstages:\n  - id: a\n    kind: func\n    postconditions: [x.y]\n    prompt: hi\n", "model settings", 3},
	}
	for _, tc := range cases {
		_, err := ParseSpec("p.yaml", []byte(tc.src))
		e := agenterr.From(err)
		if e == nil || e.Code != agenterr.CodePipelineSpec || !strings.Contains(e.Error(), tc.want) || e.File != "p.yaml" {
			t.Errorf("%q: err = %v", tc.src, err)
			continue
		}
		if tc.line > 0 && e.Line != tc.line {
			t.Errorf("%q: line %d, want %d (%v)", tc.src, e.Line, tc.line, err)
		}
	}
}

// Compile problems in a file point at the stage's line.
func TestSpecCompileErrorsHaveLines(t *testing.T) {
	src := `version: 1
inputs: []
stages:
  - id: summarization
  - id: a
    kind: func
    use: f
    postconditions: [k.a]
    depends_on: [b]
  - id: b
    kind: func
    use: f
    postconditions: [k.b]
    depends_on: [a]
`
	f := map[string]func(context.Context, *AgentContext) error{"f": func(context.Context, *AgentContext) error { return nil }}
	_, err := buildSpec(t, src, BuildOptions{Funcs: f})
	if agenterr.CodeOf(err) != agenterr.CodePipelineCompile {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"p.yaml:4:9: stage summarization: precondition reasoning.intents is produced by no earlier stage or input",
		"p.yaml:5:9: stages form a cycle: a [depends_on] -> b [depends_on] -> a"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in\n%s", want, msg)
		}
	}
	if e := agenterr.From(err); e.File != "p.yaml" || e.Line != 4 {
		t.Errorf("location %s", e.Location())
	}
	// Resolution errors.
	for src, want := range map[string]string{
		"version: 1\nstages: [{id: nope}]\n":                                                   "unknown standard agent",
		"version: 1\nstages: [{id: a, kind: func, use: missing, postconditions: [k.a]}]\n":     "unknown function",
		"version: 1\nstages: [{id: a, kind: model, postconditions: [k.a]}]\n":                  "no model is configured",
		"version: 1\nstages: [{id: a, kind: agent, dir: sub, postconditions: [k.a]}]\n":        "no agent runner",
		"version: 1\nstages: [{id: a, kind: model, model: 'nope:x', postconditions: [k.a]}]\n": "UNKNOWN_PROVIDER",
	} {
		if _, err := buildSpec(t, src, BuildOptions{Funcs: f}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v", src, err)
		}
	}
	// An agent stage's dir must exist, relative to the file.
	dir := t.TempDir()
	_ = os.Mkdir(filepath.Join(dir, "writer"), 0o755)
	spec, err := ParseSpec(filepath.Join(dir, "p.yaml"), []byte("version: 1\nstages: [{id: a, kind: agent, dir: writer, postconditions: [k.a]}, {id: b, kind: agent, dir: ../../etc/nowhere, postconditions: [k.b]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	runner := runnerFunc(func(context.Context, string, map[string]string) (json.RawMessage, error) { return nil, nil })
	_, err = spec.Build(context.Background(), BuildOptions{Runner: runner})
	if err == nil || !strings.Contains(err.Error(), "is not a folder") || agenterr.From(err).Line != 2 {
		t.Fatalf("err = %v", err)
	}
	spec.Stages = spec.Stages[:1]
	if _, err := spec.Build(context.Background(), BuildOptions{Runner: runner}); err != nil {
		t.Fatal(err)
	}
}

func TestExampleSpecsParse(t *testing.T) {
	files, _ := filepath.Glob("../examples/pipeline/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example pipelines")
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".script.yaml") { // scripted model answers, not pipelines
			continue
		}
		if _, err := LoadSpec(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := LoadSpec("does-not-exist.yaml"); agenterr.CodeOf(err) != agenterr.CodeConfigurationNotFound {
		t.Fatalf("err = %v", err)
	}
}

func FuzzPipelineYAML(f *testing.F) {
	seeds := []string{
		"version: 1\nstages: [{id: a}]\n",
		"version: 1\noptions: {fail_on_violation: false}\nkeys: [{name: k.x, type: array, reducer: append}]\nstages:\n  - id: a\n    kind: func\n    postconditions: [k.x]\n    timeout: 5s\n    retry: {max_retries: 1, backoff: 1ms}\n",
		"version: 1\nstages:\n  - id: m\n    kind: model\n    postconditions: [k.y]\n    prompt: '{{json input.request}}'\n    schema: {type: object}\n",
		"version: 1\nstages: [{id: a, kind: agent, dir: x, params: {p: '{{input.request}}'}, postconditions: [k.z]}]\n",
		"{",
		"version: 1\nstages: &a [*a]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("f.yaml", data)
		if err != nil {
			if agenterr.From(err) == nil {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		for _, st := range s.Stages {
			if CheckID(st.ID) != nil || st.Timeout < 0 || st.Retry.MaxRetries < 0 || st.Retry.MaxRetries > MaxRetriesLimit {
				t.Fatalf("accepted bad stage %+v", st)
			}
		}
		// Building must not panic either; errors are coded.
		_, err = s.Build(context.Background(), BuildOptions{Standard: testStandard,
			Funcs:        map[string]func(context.Context, *AgentContext) error{},
			DefaultModel: &replyModel{},
			OpenModel:    func(context.Context, string) (llm.Model, error) { return &replyModel{}, nil },
			BaseDir:      t.TempDir()})
		if err != nil && agenterr.From(err) == nil {
			t.Fatalf("uncoded build error %v", err)
		}
	})
}

// An alias bomb inside a free-form field is refused before decoding.
func TestSpecAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nkeys:\n  - name: k.a\n    schema:\n      x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "      x%d: &a%d [", i, i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("stages: [{id: a}]\n")
	_, err := ParseSpec("bomb.yaml", []byte(b.String()))
	if agenterr.CodeOf(err) != agenterr.CodePipelineSpec || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("err = %v", err)
	}
	// Ordinary aliases are fine.
	if _, err := ParseSpec("ok.yaml", []byte("version: 1\nstages:\n  - &s {id: a, kind: func, postconditions: [k.a]}\n  - {id: b, kind: func, postconditions: &p [k.b]}\n  - {id: c, kind: func, preconditions: *p, postconditions: [k.c]}\n")); err != nil {
		t.Fatal(err)
	}
}
