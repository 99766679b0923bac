package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

func parseCompletion(t *testing.T, js string) agentdir.Completion {
	t.Helper()
	var c agentdir.Completion
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFromConfigBuildsTree(t *testing.T) {
	cfg := parseCompletion(t, `{"type":"composite","mode":"any","conditions":[
		{"type":"keyword","name":"said-done","keyword":"TASK_COMPLETE"},
		{"type":"iterationBudget","maxIterations":3},
		{"type":"stepFlow"}]}`)
	h, err := CompletionFromConfig(cfg, HandlerDeps{})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := h.(*Composite)
	if !ok {
		t.Fatalf("got %T", h)
	}
	for i := 1; i <= 2; i++ {
		if r, _ := h.Check(context.Background(), ctxAt(i, "working")); r.Complete {
			t.Fatalf("complete at %d", i)
		}
	}
	r, err := h.Check(context.Background(), ctxAt(3, "working"))
	if err != nil || !r.Complete {
		t.Fatalf("r=%+v err=%v", r, err)
	}
	states := c.ConditionStates()
	if len(states) != 3 || states["said-done"] || !states["iterationBudget#1"] || states["stepFlow#2"] {
		t.Fatalf("states = %v", states)
	}
}

func TestFromConfigErrors(t *testing.T) {
	cases := []struct {
		js, pointer string
	}{
		{`{}`, "/runner/completion/type"},
		{`{"type":"magic"}`, "/runner/completion/type"},
		{`{"type":"iterationBudget"}`, "/runner/completion/maxIterations"},
		{`{"type":"iterationBudget","maxIterations":-2}`, "/runner/completion/maxIterations"},
		{`{"type":"keyword"}`, "/runner/completion/keyword"},
		{`{"type":"composite","mode":"xor","conditions":[{"type":"stepFlow"}]}`, "/runner/completion/mode"},
		{`{"type":"composite","mode":"all"}`, "/runner/completion/conditions"},
		{`{"type":"composite","mode":"all","conditions":[{"type":"stepFlow"},{"type":"keyword"}]}`, "/runner/completion/conditions/1/keyword"},
		{`{"type":"composite","mode":"all","conditions":[{"type":"stepFlow","name":"a"},{"type":"stepFlow","name":"a"}]}`, "/runner/completion/conditions/1/name"},
		{`{"type":"structured","options":{"statusField":3}}`, "/runner/completion/options/statusField"},
		{`{"type":"externalState"}`, "/runner/completion/options/number"},
		{`{"type":"externalState","options":{"number":0}}`, "/runner/completion/options/number"},
		{`{"type":"externalState","options":{"number":"${issue}"}}`, "/runner/completion/options/number"},
		{`{"type":"externalState","options":{"number":"abc"}}`, "/runner/completion/options/number"},
		{`{"type":"externalState","options":{"number":1,"resource":"discussion"}}`, "/runner/completion/options/resource"},
		{`{"type":"custom","handler":"nope"}`, "/runner/completion/handler"},
	}
	for _, c := range cases {
		_, err := CompletionFromConfig(parseCompletion(t, c.js), HandlerDeps{})
		e := agenterr.From(err)
		if e == nil || e.Code != agenterr.CodeConfigurationValidation {
			t.Errorf("%s: err = %v, want CONFIG_INVALID", c.js, err)
			continue
		}
		if e.Pointer != c.pointer || e.File != "agent.json" || e.Hint == "" {
			t.Errorf("%s: pointer %q file %q hint %q; want pointer %q", c.js, e.Pointer, e.File, e.Hint, c.pointer)
		}
	}
}

func TestFromConfigExternalStateParams(t *testing.T) {
	h, err := CompletionFromConfig(parseCompletion(t, `{"type":"externalState","options":{"number":"${issue}","repo":"o/r"}}`),
		HandlerDeps{Params: map[string]string{"issue": "42"}, WorkDir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	es := h.(*ExternalState)
	if es.Number != 42 || es.Repo != "o/r" || es.WorkDir != "/w" {
		t.Fatalf("got %+v", es)
	}
}

func TestFromConfigStructured(t *testing.T) {
	h, err := CompletionFromConfig(parseCompletion(t, `{"type":"structured","keyword":"DONE","validators":["out.txt"]}`),
		HandlerDeps{HasValidator: func(n string) bool { return n == "out.txt" }})
	if err != nil {
		t.Fatal(err)
	}
	// The handler reports the claim; verification is the verdict stage's.
	r, err := h.Check(context.Background(), ctxAt(1, "DONE"))
	if err != nil || !r.Complete || !r.Declared || r.Validation != nil {
		t.Fatalf("declared: %+v %v", r, err)
	}
	if r, _ := h.Check(context.Background(), ctxAt(2, "working")); r.Complete || r.Declared {
		t.Fatalf("undeclared: %+v", r)
	}
}

func TestFromConfigValidatorsOnEveryType(t *testing.T) {
	has := func(n string) bool { return n == "tests-pass" }
	for _, js := range []string{
		`{"type":"keyword","keyword":"K","validators":["nope"]}`,
		`{"type":"iterationBudget","maxIterations":2,"validators":["nope"]}`,
		`{"type":"stepFlow","validators":["nope"]}`,
		`{"type":"structured","validators":["nope"]}`,
		`{"type":"composite","mode":"any","conditions":[{"type":"stepFlow"}],"validators":["nope"]}`,
	} {
		_, err := CompletionFromConfig(parseCompletion(t, js), HandlerDeps{HasValidator: has})
		if e := agenterr.From(err); e == nil || e.Pointer != "/runner/completion/validators/0" {
			t.Errorf("%s: unknown validator not rejected: %v", js, err)
		}
	}
	// Validators inside a composite condition would verify only part of a
	// claim: rejected, with the place to put them.
	_, err := CompletionFromConfig(parseCompletion(t, `{"type":"composite","mode":"any","conditions":[{"type":"keyword","keyword":"K","validators":["tests-pass"]}]}`), HandlerDeps{HasValidator: has})
	if e := agenterr.From(err); e == nil || e.Pointer != "/runner/completion/conditions/0/validators" {
		t.Fatalf("condition validators: %v", err)
	}
	_, err = CompletionFromConfig(parseCompletion(t, `{"type":"composite","mode":"any","conditions":[{"type":"structured","options":{"acceptUndeclared":true}}],"validators":["tests-pass"]}`), HandlerDeps{HasValidator: has})
	if e := agenterr.From(err); e == nil || e.Pointer != "/runner/completion/conditions/0/options/acceptUndeclared" {
		t.Fatalf("condition acceptUndeclared: %v", err)
	}
	_, err = CompletionFromConfig(agentdir.Completion{Type: TypeStructured, Options: map[string]json.RawMessage{"acceptUndeclared": json.RawMessage("true")}}, HandlerDeps{HasValidator: has})
	if e := agenterr.From(err); e == nil || e.Pointer != "/runner/completion/options/acceptUndeclared" {
		t.Fatalf("acceptUndeclared without validators: %v", err)
	}
}

func TestFromConfigPerAgentHandler(t *testing.T) {
	made := 0
	deps := HandlerDeps{Handlers: map[string]HandlerFactory{"mine": func(agentdir.Completion, HandlerDeps) (CompletionHandler, error) {
		made++
		return &StepFlow{}, nil
	}}}
	if _, err := CompletionFromConfig(agentdir.Completion{Type: TypeCustom, Handler: "mine"}, deps); err != nil || made != 1 {
		t.Fatalf("per-agent handler: made %d, %v", made, err)
	}
	// Another agent does not see it.
	if _, err := CompletionFromConfig(agentdir.Completion{Type: TypeCustom, Handler: "mine"}, HandlerDeps{}); err == nil {
		t.Fatal("a per-agent handler leaked into the global registry")
	}
}

// phasedFactory builds the test's custom handler; a negative
// maxIterations is its error.
func phasedFactory(cfg agentdir.Completion, deps HandlerDeps) (CompletionHandler, error) {
	if cfg.MaxIterations < 0 {
		return nil, errors.New("negative")
	}
	return &phased{}, nil
}

func TestCustomHandlerFactory(t *testing.T) {
	deps := HandlerDeps{Handlers: map[string]HandlerFactory{"test-phased": phasedFactory}}
	h, err := CompletionFromConfig(agentdir.Completion{Type: "custom", Handler: "test-phased"}, deps)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		ProcessSignal(h, Signal{Type: SignalPhaseAdvance})
	}
	if r, _ := h.Check(context.Background(), ctxAt(1)); !r.Complete {
		t.Fatal("custom phased handler did not complete after two phases")
	}
	_, err = CompletionFromConfig(agentdir.Completion{Type: "custom", Handler: "test-phased", MaxIterations: -1}, deps)
	if e := agenterr.From(err); e == nil || !strings.Contains(e.Message, "negative") {
		t.Fatalf("factory error not reported: %v", err)
	}
	// An unknown name is refused with the agent's handler names.
	_, err = CompletionFromConfig(agentdir.Completion{Type: "custom", Handler: "nope"}, deps)
	if err == nil || !strings.Contains(err.Error(), "test-phased") || !strings.Contains(err.Error(), "agent.Config.CompletionHandlers") {
		t.Fatalf("unknown handler: %v", err)
	}
}

// fakeGH writes a gh stand-in first on PATH; it records its arguments and
// prints the state stored in a file, or fails when the file says "fail".
func fakeGH(t *testing.T, state string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	script := `#!/bin/sh
echo "$@" > "` + dir + `/args"
s=$(cat "` + dir + `/state")
if [ "$s" = fail ]; then echo "HTTP 401: Bad credentials" >&2; exit 1; fi
if [ "$s" = garbage ]; then echo "not json"; exit 0; fi
printf '{"state":"%s"}\n' "$s"
`
	if err := os.WriteFile(filepath.Join(dir, "gh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	setState(t, dir, state)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

func setState(t *testing.T, dir, s string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExternalStateWithGH(t *testing.T) {
	dir := fakeGH(t, "OPEN")
	h := &ExternalState{Number: 7, Repo: "acme/app", WorkDir: t.TempDir()}
	r, err := h.Check(context.Background(), ctxAt(1))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, h, r)
	if r.Complete || h.LastState() != "OPEN" {
		t.Fatalf("open issue: %+v state %q", r, h.LastState())
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if strings.TrimSpace(string(args)) != "issue view 7 --json state --repo acme/app" {
		t.Fatalf("gh args = %q", args)
	}
	setState(t, dir, "CLOSED")
	r, err = h.Check(context.Background(), ctxAt(2))
	if err != nil || !r.Complete || !strings.Contains(r.Reason, "#7") {
		t.Fatalf("closed issue: %+v %v", r, err)
	}
	checkInvariants(t, h, r)

	setState(t, dir, "fail")
	_, err = h.Check(context.Background(), ctxAt(3))
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeExternalState || !e.Recoverable || !strings.Contains(e.Message, "Bad credentials") {
		t.Fatalf("gh failure: %v", err)
	}
	setState(t, dir, "garbage")
	if _, err := h.Check(context.Background(), ctxAt(3)); !errors.Is(err, agenterr.ErrExternalState) {
		t.Fatalf("garbage output: %v", err)
	}

	pr := &ExternalState{Resource: "pr", Number: 3}
	setState(t, dir, "MERGED")
	if r, err := pr.Check(context.Background(), ctxAt(1)); err != nil || !r.Complete {
		t.Fatalf("merged pr: %+v %v", r, err)
	}
	args, _ = os.ReadFile(filepath.Join(dir, "args"))
	if strings.TrimSpace(string(args)) != "pr view 3 --json state" {
		t.Fatalf("gh args = %q", args)
	}
}

func TestExternalStateMissingGH(t *testing.T) {
	h := &ExternalState{Number: 1, GH: filepath.Join(t.TempDir(), "no-such-gh")}
	_, err := h.Check(context.Background(), ctxAt(1))
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeExternalState || e.Hint == "" {
		t.Fatalf("err = %v", err)
	}
}
