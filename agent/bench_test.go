package agent

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkIteration measures one agent iteration end to end: prompt
// resolved from disk (C3L, frontmatter, variables), a query through the
// shared tool loop to the script provider, the iteration summary, the step
// machine and completion check, and every journal event written to a real
// events.jsonl. Each op is one run of iterationsPerRun iterations; only
// Run is timed and counted (building the agent — reading the script,
// creating the journal — is excluded), and the per-iteration figures are
// reported as ns/iter, B/iter and allocs/iter.
func BenchmarkIteration(b *testing.B) {
	const iterationsPerRun = 50
	var sb strings.Builder
	sb.WriteString("turns:\n")
	for i := 0; i < iterationsPerRun; i++ {
		fmt.Fprintf(&sb, "  - text: \"working on part %d of the notes\"\n", i)
	}
	dir := basicAgent(b, sb.String(), "")
	def := load(b, dir)
	ctx := context.Background()
	var elapsed time.Duration
	var bytes, mallocs uint64
	var ms0, ms1 runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a, err := Build(ctx, def, BuildOptions{WorkDir: b.TempDir(), MaxIterations: iterationsPerRun})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		b.StartTimer()
		a.Run(ctx)
		b.StopTimer()
		elapsed += time.Since(start)
		runtime.ReadMemStats(&ms1)
		bytes += ms1.TotalAlloc - ms0.TotalAlloc
		mallocs += ms1.Mallocs - ms0.Mallocs
		res := a.Stop()
		if res.Iterations != iterationsPerRun || res.CompletionReason != "max_iterations" {
			b.Fatalf("%+v", res)
		}
	}
	n := float64(b.N * iterationsPerRun)
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/iter")
	b.ReportMetric(float64(bytes)/n, "B/iter")
	b.ReportMetric(float64(mallocs)/n, "allocs/iter")
}
