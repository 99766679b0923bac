//go:build capstan20261121

// Package then is BenchmarkIteration's capstan side built against the
// capstan of 2026-11-21 (commit b015ec2), which the performance issue
// compares with: the same instant model, the same prompts, 50 iterations
// per run in one session, the process's CPU time per iteration. That
// capstan builds agents only from a folder, so the agent is written to a
// temporary folder (one step, a keyword completion never met, the
// built-in Read tool allowed). It builds only in a checkout of that
// commit: run.sh makes one and runs it (see docs/benchmarks.md).
package then

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/llm"
	"golang.org/x/sys/unix"
)

const iterationsPerRun = 50

const replyText = "working on part of the notes"

// instantModel answers every request at once in text, as the eino
// module's model does.
type instantModel struct{}

func (instantModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: replyText}, StopReason: "end_turn",
		Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}, nil
}

func init() {
	llm.RegisterModel("instant", func(context.Context, llm.Config) (llm.Model, error) { return instantModel{}, nil })
}

var files = map[string]string{
	"agent.json": `{
  "version": "1.0.0", "name": "bench", "description": "benchmark agent",
  "runner": {
    "model": "instant:bench",
    "systemPromptPath": "prompts/system.md",
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Read"], "permissionMode": "acceptEdits"}
  }
}`,
	"steps_registry.json": `{"agentId": "bench", "c1": "steps", "entryStep": "initial.work",
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work"}}}`,
	"prompts/system.md":                       "You work in a temporary directory.",
	"prompts/steps/initial/work/f_default.md": "Iteration {uv-iteration}: write notes about boats.",
}

// processCPU is the CPU time the process has used (user and system,
// all threads), as testenv.ProcessCPUTime in the eino module reads it.
func processCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// BenchmarkIteration is the eino module's Iteration/capstan on the capstan
// of 2026-11-21: one op is a run of iterationsPerRun iterations, and the
// figures are per iteration of the timed Run only.
func BenchmarkIteration(b *testing.B) {
	b.Run("capstan-2026-11-21", func(b *testing.B) {
		dir := b.TempDir()
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		def, err := config.LoadAndValidate(dir, agent.ValidateOptions())
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		var elapsed, cpu time.Duration
		var bytes, mallocs uint64
		var ms0, ms1 runtime.MemStats
		b.ResetTimer()
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			a, err := agent.Build(ctx, def, agent.BuildOptions{WorkDir: b.TempDir(), MaxIterations: iterationsPerRun,
				Getenv: func(string) string { return "" }})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Start(ctx); err != nil {
				b.Fatal(err)
			}
			runtime.ReadMemStats(&ms0)
			t0, c0 := time.Now(), processCPU()
			b.StartTimer()
			a.Run(ctx)
			b.StopTimer()
			elapsed += time.Since(t0)
			cpu += processCPU() - c0
			runtime.ReadMemStats(&ms1)
			bytes += ms1.TotalAlloc - ms0.TotalAlloc
			mallocs += ms1.Mallocs - ms0.Mallocs
			res := a.Stop()
			if res.Iterations != iterationsPerRun || res.CompletionReason != "max_iterations" {
				b.Fatalf("%+v", res)
			}
		}
		n := float64(b.N * iterationsPerRun)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/iter")
		b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/iter")
		b.ReportMetric(float64(bytes)/n, "B/iter")
		b.ReportMetric(float64(mallocs)/n, "allocs/iter")
	})
}
