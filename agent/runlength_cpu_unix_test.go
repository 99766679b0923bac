//go:build unix

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
)

// cpuAtStart records the process's CPU time (testenv.ProcessCPUTime) when each iteration starts.
type cpuAtStart struct{ at []time.Duration }

func (o *cpuAtStart) Consume(e event.Event) {
	if e.Kind == event.KindIterationStart {
		o.at = append(o.at, testenv.ProcessCPUTime())
	}
}

// contextAgent is an agent whose model's context window is known (as it
// is for a real model name; the script provider has none, so the agent
// sets runner.contextWindow), so every model turn goes through the
// compactor's sizing. Each iteration is a Read call and a final answer;
// the turns report their usage, as a real provider's answers do.
func contextAgent(b *testing.B, iterations int) *agentdir.Agent {
	var sb strings.Builder
	sb.WriteString("turns:\n")
	for i := 0; i < iterations; i++ {
		fmt.Fprintf(&sb, "  - text: \"reading the notes, part %d\"\n    usage: {input_tokens: 900, output_tokens: 12}\n"+
			"    tool_calls:\n      - name: Read\n        input: {file_path: notes.txt}\n"+
			"  - text: \"part %d of the notes is read; the next part follows\"\n    usage: {input_tokens: 950, output_tokens: 14}\n", i, i)
	}
	dir := writeAgent(b, map[string]string{
		"agent.json": `{
  "version": "1.0.0", "name": "basic", "description": "test agent",
  "parameters": {"topic": {"type": "string", "description": "what to write about", "default": "boats"}},
  "runner": {
    "model": "script:script.yaml",
    "contextWindow": 200000,
    "systemPromptPath": "prompts/system.md",
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Read", "Write"], "permissionMode": "acceptEdits"},
    "budgets": {"maxIterations": 100}
  }
}`,
		"steps_registry.json": `{"agentId": "basic", "c1": "steps", "entryStep": "initial.work",
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work", "uvVariables": ["topic"]}}}`,
		"prompts/system.md":                       "You work in {uv-workdir}.",
		"prompts/steps/initial/work/f_default.md": "---\nstepId: initial.work\n---\nIteration {uv-iteration}: write notes about {uv-topic}.",
		"script.yaml":                             sb.String(),
	})
	return load(b, dir)
}

// BenchmarkIterationCostByRunLength measures whether an iteration costs
// more CPU the longer the run when the model's context window is known
// (every turn is sized against it): one op is a run of 100 iterations
// (the hard limit) in one session, each a Read call and an answer, and
// the process CPU time of iterations 1–5 and 96–100 is reported per
// iteration (medians over the ops are the steadier figure on a shared
// machine). Sizing that re-measures the whole transcript every turn makes
// the late figure grow with the session.
func BenchmarkIterationCostByRunLength(b *testing.B) {
	const iterationsPerRun = HardLimit
	def := contextAgent(b, iterationsPerRun)
	ctx := context.Background()
	var early, late time.Duration
	for i := 0; i < b.N; i++ {
		work := b.TempDir()
		if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte(strings.Repeat("boats float on water.\n", 40)), 0o644); err != nil {
			b.Fatal(err)
		}
		obs := &cpuAtStart{}
		a, err := Build(ctx, def, BuildOptions{WorkDir: work, MaxIterations: iterationsPerRun, Events: []event.Consumer{obs}})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			b.Fatal(err)
		}
		a.Run(ctx)
		end := testenv.ProcessCPUTime()
		if res := a.Stop(); res.Iterations != iterationsPerRun {
			b.Fatalf("%+v", res)
		}
		// at[k] is the CPU time when iteration k+1 started.
		at := append(obs.at, end)
		early += at[5] - at[0]
		late += at[100] - at[95]
	}
	n := float64(b.N * 5)
	b.ReportMetric(float64(early.Nanoseconds())/n, "cpu-ns/iter-1-5")
	b.ReportMetric(float64(late.Nanoseconds())/n, "cpu-ns/iter-96-100")
	b.ReportMetric(float64(late)/float64(early), "late/early")
}
