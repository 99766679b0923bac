package agent

import (
	"context"
	"runtime"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkIteration measures one agent iteration end to end: prompt
// resolved from disk (C3L, frontmatter, variables), a query through the
// shared tool loop to the script provider, the iteration summary, the step
// machine and completion check, and every journal event written to a real
// events.jsonl. Each op is one run of iterationsPerRun iterations; only
// Run is timed and counted (building the agent — reading the script,
// creating the journal — is excluded), and the per-iteration figures are
// reported as ns/iter, B/iter and allocs/iter.
func BenchmarkIteration(b *testing.B) { benchmarkIteration(b, nil) }

// BenchmarkIterationTraced is BenchmarkIteration with tracing on: the
// journal events also become spans, through the SDK's batch span processor
// to an exporter that drops them (what is measured is capstan's mapping
// and the SDK's span bookkeeping, not a network).
func BenchmarkIterationTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	benchmarkIteration(b, tp)
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

func benchmarkIteration(b *testing.B, tp trace.TracerProvider) {
	const iterationsPerRun = 50
	def := textTurnsAgent(b, iterationsPerRun)
	ctx := context.Background()
	var elapsed time.Duration
	var bytes, mallocs uint64
	var ms0, ms1 runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a, err := Build(ctx, def, BuildOptions{WorkDir: b.TempDir(), MaxIterations: iterationsPerRun, TracerProvider: tp})
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
