package agentdir_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	_ "github.com/capstan-dev/capstan/llm/script" // the agents use script models
)

// steps200 writes an agent with 200 chained steps, each with its own
// prompt file, and returns its folder.
func steps200(b *testing.B) string {
	dir := b.TempDir()
	var steps []string
	for i := range 200 {
		next := fmt.Sprintf(`{"next": "s%03d"}`, i+1)
		if i == 199 {
			next = `{"complete": true}`
		}
		steps = append(steps, fmt.Sprintf(`"s%03d": {"stepId": "s%03d", "c2": "work", "c3": "s%03d",
  "check": {"type": "keyword", "keywords": ["NEXT"], "onPass": %s, "onFail": {"retry": true}}}`, i, i, i, next))
		p := filepath.Join(dir, "prompts", "steps", "work", fmt.Sprintf("s%03d", i), "f_default.md")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("Step %d of {uv-agent_name}: do the work, then say NEXT.\n", i)), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"version": "1.0.0", "name": "big", "description": "200 steps",
  "runner": {"model": "script:script.yaml", "systemPromptPath": "prompts/system.md", "completion": {"type": "stepFlow"}}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "steps_registry.json"), []byte(`{"agentId": "big", "entryStep": "s000", "steps": {`+strings.Join(steps, ",\n")+`}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "prompts", "system.md"), []byte("You are {uv-agent_name}."), 0o644)
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("turns:\n  - text: NEXT\n"), 0o644)
	return dir
}

// BenchmarkStart measures what `capstan run` pays to read and validate an
// agent before the first iteration: "disk" loads from the folder (as
// before definitions were pinned), "pinned" takes the snapshot and loads
// through it.
func BenchmarkStart(b *testing.B) {
	for _, tc := range []struct {
		name string
		dir  func(*testing.B) string
	}{
		{"hello", func(*testing.B) string { return "../examples/hello" }},
		{"steps200", steps200},
	} {
		dir := tc.dir(b)
		b.Run(tc.name+"/disk", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := agentdir.LoadAndValidate(dir, agent.ValidateOptions()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/pinned", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				snap, err := agentdir.TakeSnapshot(dir, agentdir.SnapshotOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := agentdir.LoadAndValidateFS(snap, dir, agent.ValidateOptions()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
