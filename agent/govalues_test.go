package agent

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agentdir"
)

// minimalGoValues is an agent in Go values with no file coordinates: no
// version, no agentId, no C2/C3 and no stepId.
func minimalGoValues() Config {
	return Config{
		Definition: &agentdir.Definition{Name: "greeter", Runner: agentdir.Runner{
			Model:      "script:replies.yaml",
			Completion: agentdir.Completion{Type: "keyword", Keyword: "DONE", Validators: []string{"loud"}},
		}},
		Registry: &agentdir.Registry{EntryStep: "greet", Steps: map[string]agentdir.Step{"greet": {}},
			Validators: map[string]agentdir.Validator{"loud": {Type: "command", Command: "true", FailurePattern: "file-not-exists"}}},
		Prompts: Prompts{Steps: map[string]string{"greet": "Say DONE."}},
	}
}

// TestGoValuesNeedNoFileCoordinates: Go values without the fields only a
// file needs build, and they are exactly the values the folder loader
// produces from the same agent written as files (with version, agentId,
// c2 and c3 spelled out).
func TestGoValuesNeedNoFileCoordinates(t *testing.T) {
	cfg := minimalGoValues()
	cfg.Files = fstest.MapFS{"replies.yaml": {Data: []byte("turns:\n  - text: DONE\n")}}
	fromGo, err := Define(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := writeFolder(t, map[string]string{
		agentdir.AgentFile: `{"version": "1.0.0", "name": "greeter", "runner": {"model": "script:replies.yaml",
		"completion": {"type": "keyword", "keyword": "DONE", "validators": ["loud"]}}}`,
		agentdir.DefaultRegistryFile: `{"agentId": "greeter", "entryStep": "greet", "steps": {"greet": {"c2": "greet", "c3": "main"}},
		"validators": {"loud": {"type": "command", "command": "true", "failurePattern": "file-not-exists"}}}`,
		"prompts/steps/greet/main/f_default.md": "Say DONE.",
		"replies.yaml":                          "turns:\n  - text: DONE\n",
	})
	fromFolder, err := Load(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if g, f := asJSON(fromGo.Agent.Definition()), asJSON(fromFolder.Agent.Definition()); g != f {
		t.Errorf("definitions differ:\nGo:     %s\nfolder: %s", g, f)
	}
	if g, f := asJSON(fromGo.Agent.Registry()), asJSON(fromFolder.Agent.Registry()); g != f {
		t.Errorf("registries differ:\nGo:     %s\nfolder: %s", g, f)
	}
	if cfg.Definition.Version != "" || cfg.Registry.Steps["greet"].C2 != "" {
		t.Error("Define changed the caller's values")
	}
}

// TestGoValuesStepsFromPrompts: a registry that declares no steps gets one
// normal step per step prompt, and a registry with one step starts at it;
// the result is the registry spelled out. A registry that declares steps
// keeps them: a prompt of another step is still a mistyped key.
func TestGoValuesStepsFromPrompts(t *testing.T) {
	replies := fstest.MapFS{"replies.yaml": {Data: []byte("turns:\n  - text: DONE\n")}}
	spelled := minimalGoValues()
	spelled.Files = replies
	want, err := Define(spelled)
	if err != nil {
		t.Fatal(err)
	}
	implied := minimalGoValues()
	implied.Registry.EntryStep, implied.Registry.Steps = "", nil
	implied.Files = replies
	got, err := Define(implied)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got.Agent.Registry())
	w, _ := json.Marshal(want.Agent.Registry())
	if string(g) != string(w) {
		t.Errorf("registry from the prompts:\n%s\nspelled out:\n%s", g, w)
	}
	if implied.Registry.Steps != nil || implied.Registry.EntryStep != "" {
		t.Error("Define changed the caller's registry")
	}

	typo := minimalGoValues()
	typo.Prompts.Steps = map[string]string{"greet": "Say DONE.", "gret": "Say DONE."}
	typo.Files = replies
	if _, err := Define(typo); err == nil || !strings.Contains(err.Error(), `no step "gret"`) {
		t.Errorf("a prompt of an undeclared step next to declared ones: %v", err)
	}
}

// TestRunReportsBuildProblems: agent.Run of a Config that does not build
// returns an error Result whose Err is New's error, at the Go field.
func TestRunReportsBuildProblems(t *testing.T) {
	cfg := minimalGoValues()
	cfg.Definition.Runner.Completion.Keyword = ""
	res := Run(t.Context(), cfg)
	var ve *agentdir.ValidationError
	if res.Success || res.CompletionReason != ReasonError || !errors.As(res.Err(), &ve) ||
		!strings.Contains(res.Reason, "Config.Definition.Runner.Completion.Keyword") {
		t.Fatalf("result %+v, err %v", res, res.Err())
	}
}

// TestGoValuesStepIDNotAFileName: a step id that is no file name still
// gets its Go prompt (under a digest of the id).
func TestGoValuesStepIDNotAFileName(t *testing.T) {
	cfg := minimalGoValues()
	cfg.Registry.EntryStep = "greet/../x"
	cfg.Registry.Steps = map[string]agentdir.Step{"greet/../x": {}}
	cfg.Prompts.Steps = map[string]string{"greet/../x": "Say DONE."}
	cfg.Files = fstest.MapFS{"replies.yaml": {Data: []byte("turns:\n  - text: DONE\n")}}
	got, err := Define(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st := got.Agent.Registry().Steps["greet/../x"]; !strings.HasPrefix(st.C2, "step-") || st.C3 != "main" {
		t.Fatalf("step = %+v", st)
	}
}

// TestGoValuesErrorsNameGoFields: problems of Go values are located at
// the Go fields that hold them, and the hint names the Go API, not a
// folder the embedder does not have.
func TestGoValuesErrorsNameGoFields(t *testing.T) {
	cfg := minimalGoValues()
	cfg.Definition.Runner.Completion.Keyword = ""
	cfg.Registry.Validators = map[string]agentdir.Validator{"loud": {Type: "command", Command: "true"},
		"mine": {Type: "custom", Handler: "nope", FailurePattern: "file-not-exists"}}
	cfg.Prompts.Steps = nil // the step has no prompt now
	_, err := Define(cfg)
	var ve *agentdir.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	files := map[string]bool{}
	for _, p := range ve.Problems() {
		files[p.File] = true
		if p.Pointer != "" {
			t.Errorf("problem keeps a JSON pointer: %v", p)
		}
	}
	for _, want := range []string{`Config.Registry.Validators["loud"].FailurePattern`, "Config.Definition.Runner.Completion.Keyword",
		`Config.Registry.Validators["mine"].Handler`} {
		if !files[want] {
			t.Errorf("no problem at %s: %v", want, ve.Problems())
		}
	}
	for _, want := range []string{`give it its prompt in Config.Prompts.Steps["greet"]`, "a required field is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in:\n%v", want, err)
		}
	}
	for _, bad := range []string{"capstan validate", "agent.json:", "steps_registry.json:", "AC-PROMPTS-DIR-MISSING", "set c2 and c3"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("error names %q:\n%v", bad, err)
		}
	}
	if !strings.Contains(err.Error(), "agent.Define") {
		t.Errorf("hint does not name the Go API:\n%v", err)
	}
}

// TestGoFieldPath: JSON pointers become Go selectors.
func TestGoFieldPath(t *testing.T) {
	for ptr, want := range map[string]string{
		"":                                  "",
		"/runner/completion/type":           ".Runner.Completion.Type",
		"/runner/boundaries/allowedTools/1": ".Runner.Boundaries.AllowedTools[1]",
		"/parameters/a~1b/type":             `.Parameters["a/b"].Type`,
		"/runner/noSuchKey/x":               `.Runner["noSuchKey"]["x"]`,
	} {
		if got := goFieldPath(reflect.TypeFor[agentdir.Definition](), ptr); got != want {
			t.Errorf("%q → %q, want %q", ptr, got, want)
		}
	}
}

// writeFolder writes files (path → text) into a new agent folder.
func writeFolder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, text := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestFolderAndGoValuesAgreeOnDefaults: what Go values may leave out — the
// version, agentId, the entry step of a one-step registry (also when
// climpt's detect:graph names it) — a folder may leave out too, with the
// same values; and both refuse the same things: two steps and no entry
// step, a detect:graph entry step that is no step.
func TestFolderAndGoValuesAgreeOnDefaults(t *testing.T) {
	replies := "turns:\n  - text: DONE\n"
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	goValues := minimalGoValues()
	goValues.Registry.EntryStep = ""
	goValues.Files = fstest.MapFS{"replies.yaml": {Data: []byte(replies)}}
	fromGo, err := Define(goValues)
	if err != nil {
		t.Fatal(err)
	}
	folder := map[string]string{
		agentdir.AgentFile: `{"name": "greeter", "runner": {"model": "script:replies.yaml",
			"completion": {"type": "keyword", "keyword": "DONE", "validators": ["loud"]}}}`,
		agentdir.DefaultRegistryFile: `{"steps": {"greet": {"c2": "greet", "c3": "main"}},
			"validators": {"loud": {"type": "command", "command": "true", "failurePattern": "file-not-exists"}}}`,
		"prompts/steps/greet/main/f_default.md": "Say DONE.",
		"replies.yaml":                          replies,
	}
	fromFolder, err := Load(writeFolder(t, folder), Config{})
	if err != nil {
		t.Fatalf("a folder without version, agentId and the entry step of its one step: %v", err)
	}
	if g, f := asJSON(fromGo.Agent.Definition()), asJSON(fromFolder.Agent.Definition()); g != f {
		t.Errorf("definitions differ:\nGo:     %s\nfolder: %s", g, f)
	}
	if g, f := asJSON(fromGo.Agent.Registry()), asJSON(fromFolder.Agent.Registry()); g != f {
		t.Errorf("registries differ:\nGo:     %s\nfolder: %s", g, f)
	}
	if d, r := fromFolder.Agent.Definition(), fromFolder.Agent.Registry(); d.Version != "1.0.0" || r.AgentID != "greeter" || r.EntryStep != "greet" {
		t.Errorf("folder defaults: version %q, agentId %q, entryStep %q", d.Version, r.AgentID, r.EntryStep)
	}

	// Two steps and no entry step: both refuse, with the same code.
	twoGo := minimalGoValues()
	twoGo.Registry.EntryStep, twoGo.Registry.Steps = "", nil
	twoGo.Prompts.Steps = map[string]string{"greet": "Say DONE.", "wave": "Say DONE."}
	twoGo.Files = goValues.Files
	_, goErr := Define(twoGo)
	two := maps.Clone(folder)
	two[agentdir.DefaultRegistryFile] = `{"steps": {"greet": {"c2": "greet", "c3": "main"}, "wave": {"c2": "greet", "c3": "main"}},
		"validators": {"loud": {"type": "command", "command": "true", "failurePattern": "file-not-exists"}}}`
	_, folderErr := Load(writeFolder(t, two), Config{})
	for name, err := range map[string]error{"Go": goErr, "folder": folderErr} {
		if err == nil || !strings.Contains(err.Error(), "SR-ENTRY-STEP entryStep is not set and the registry has 2 steps") {
			t.Errorf("%s: two steps without an entry step: %v", name, err)
		}
	}
	if goErr != nil && !strings.Contains(goErr.Error(), "Config.Registry.EntryStep: error SR-ENTRY-STEP") {
		t.Errorf("Go values' problem is not at the Go field: %v", goErr)
	}

	// climpt's detect:graph names the entry step in the verdict's config.
	for entry, ok := range map[string]bool{"greet": true, "zz": false} {
		graphGo := minimalGoValues()
		graphGo.Registry.EntryStep = ""
		graphGo.Definition.Runner.Completion = agentdir.Completion{}
		graphGo.Definition.Runner.Verdict = &agentdir.Verdict{Type: agentdir.VerdictDetectGraph, Config: agentdir.VerdictConfig{EntryStep: entry}}
		graphGo.Files = goValues.Files
		_, goErr := Define(graphGo)
		graph := maps.Clone(folder)
		graph[agentdir.AgentFile] = `{"name": "greeter", "runner": {"model": "script:replies.yaml",
			"verdict": {"type": "detect:graph", "config": {"entryStep": "` + entry + `"}}}}`
		_, folderErr := Load(writeFolder(t, graph), Config{})
		for name, err := range map[string]error{"Go": goErr, "folder": folderErr} {
			if ok && err != nil {
				t.Errorf("%s: detect:graph entry step %q: %v", name, entry, err)
			}
			if !ok && (err == nil || !strings.Contains(err.Error(), `SR-ENTRY-STEP entryStep "zz" is not a step`)) {
				t.Errorf("%s: detect:graph entry step %q that is no step: %v", name, entry, err)
			}
		}
		// The problem is located where the entry step is written.
		if !ok && goErr != nil && !strings.Contains(goErr.Error(), "Config.Definition.Runner.Verdict.Config.EntryStep: error SR-ENTRY-STEP") {
			t.Errorf("Go values: the detect:graph entry step's problem is not at its field: %v", goErr)
		}
		if !ok && folderErr != nil && !strings.Contains(folderErr.Error(), "agent.json:2:64: error SR-ENTRY-STEP") {
			t.Errorf("folder: the detect:graph entry step's problem is not at its line in agent.json: %v", folderErr)
		}
	}
}

// TestGoValuesWithoutStepsSayHowToGiveThem: a registry without steps and
// no step prompts is told, at the Go field, how to give the steps — not
// that a JSON value is null.
func TestGoValuesWithoutStepsSayHowToGiveThem(t *testing.T) {
	cfg := minimalGoValues()
	cfg.Registry.EntryStep, cfg.Registry.Steps, cfg.Prompts = "", nil, Prompts{}
	cfg.Files = fstest.MapFS{"replies.yaml": {Data: []byte("turns:\n  - text: DONE\n")}}
	_, err := Define(cfg)
	if err == nil || !strings.Contains(err.Error(), "Config.Registry.Steps: error SR-SCHEMA-REQUIRED the agent has no steps — give each step its prompt in Config.Prompts.Steps") {
		t.Fatalf("no steps: %v", err)
	}
	if strings.Contains(err.Error(), "null") || strings.Contains(err.Error(), "EntryStepMapping") {
		t.Errorf("no steps: %v", err)
	}
}
