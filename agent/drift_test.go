package agent

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/journal"
)

// TestWhatValidatesBuilds: validate and New share the code that turns the
// files into runtime objects, so every agent folder of the repository (the
// examples) and of this package's tests that validates also builds, and so
// does each verdict test agent given as Go values (Define).
func TestWhatValidatesBuilds(t *testing.T) {
	dirs := map[string]string{
		"basic":       basicAgent(t, "turns:\n  - text: ALL_DONE\n", ""),
		"structured":  structuredAgent(t, "turns:\n  - text: x\n"),
		"cross":       crossLayerAgent(t),
		"climpt-work": filepath.Join("testdata", "climpt-work"),
	}
	for _, ct := range completionTypes {
		dirs["verdict-"+ct.typ] = verdictAgent(t, ct.js, ct.step, liarScript)
	}
	err := filepath.WalkDir(filepath.Join("..", "examples"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == agentdir.AgentFile {
			dirs[filepath.Dir(p)] = filepath.Dir(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fakeGH(t)
	// Values of required parameters without default.
	params := map[string]map[string]string{"climpt-work": {"issueNumber": "1"},
		filepath.Join("..", "examples", "workflow", ".agent", "writer"):   {"issue": "1"},
		filepath.Join("..", "examples", "workflow", ".agent", "reviewer"): {"issue": "1"}}
	ctx := context.Background()
	built := 0
	for name, dir := range dirs {
		cfg := goValues(&countingValidator{})
		res := agentdir.Check(dir, ValidateOptionsFor(cfg))
		if !res.Valid() {
			continue
		}
		cfg, err := Load(dir, cfg)
		if err != nil {
			t.Errorf("%s: validates but does not load: %v", name, err)
			continue
		}
		cfg.WorkDir = t.TempDir()
		cfg.Params = params[name]
		a, err := New(ctx, cfg)
		if err != nil {
			t.Errorf("%s: validates but does not build: %v", name, err)
			continue
		}
		a.Stop()
		built++
	}
	if built < len(completionTypes)+2 {
		t.Fatalf("only %d agents validated and built", built)
	}
	// The same agents as Go values validate and build too.
	for _, ct := range completionTypes {
		cfg := goValuesOf(t, verdictAgent(t, ct.js, ct.step, liarScript))
		cfg.WorkDir = t.TempDir()
		a, err := New(ctx, cfg)
		if err != nil {
			t.Errorf("%s as Go values: %v", ct.typ, err)
			continue
		}
		a.Stop()
	}
}

// TestIgnoredKeysChangeNothing: the warnings that say something is ignored
// (unknown keys in agent.json and the registry, a validator nothing
// references) are true — the same run with and without them journals the
// same events and ends the same way.
func TestIgnoredKeysChangeNothing(t *testing.T) {
	plain := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", honestScript)
	noisy := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"], "colour": "blue"}`, `"flavour": 1`, honestScript)
	addKey := func(dir, file, key string, val any) {
		p := filepath.Join(dir, file)
		var m map[string]any
		raw, _ := os.ReadFile(p)
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		m[key] = val
		out, _ := json.Marshal(m)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addKey(noisy, agentdir.AgentFile, "futureField", true)
	addKey(noisy, agentdir.DefaultRegistryFile, "futureField", true)
	codes := map[string]bool{}
	for _, p := range agentdir.Check(noisy, ValidateOptionsFor(goValues(nil))).Warnings() {
		codes[p.Code] = true
	}
	for _, want := range []string{"AC-UNKNOWN-KEY", "SR-UNKNOWN-KEY", "SR-VALIDATOR-UNUSED"} {
		if !codes[want] {
			t.Fatalf("no %s warning: %v", want, codes)
		}
	}
	story := func(dir string) (string, []string) {
		res, events := runVerdict(t, dir, nil)
		var types []string
		for _, ev := range events {
			if ev.Type != journal.Warning {
				types = append(types, ev.Type)
			}
		}
		return res.CompletionReason + " " + res.Reason, types
	}
	r1, e1 := story(plain)
	r2, e2 := story(noisy)
	if r1 != r2 || !slices.Equal(e1, e2) {
		t.Fatalf("ignored keys changed the run:\n%s %v\n%s %v", r1, e1, r2, e2)
	}
}

// TestReadmeEmbeddingIsTheExample: the README's embedding program is
// Example_embedding, so the README shows code that runs.
func TestReadmeEmbeddingIsTheExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_embedding_test.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	body := s[strings.Index(s, "// shoutInput is the input"):strings.Index(s, "\t// Output:")]
	body = strings.Replace(body, "func Example_embedding() {", "func main() {", 1)
	if !strings.Contains(string(readme), body) {
		t.Fatal("README.md's Embedding program differs from Example_embedding in agent/example_embedding_test.go")
	}
}
