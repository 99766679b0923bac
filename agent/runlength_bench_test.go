package agent

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
)

// textTurnsAgent is the basic agent with a script of n text turns.
func textTurnsAgent(b *testing.B, n int) *agentdir.Agent {
	var sb strings.Builder
	sb.WriteString("turns:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  - text: \"working on part %d of the notes\"\n", i)
	}
	return load(b, basicAgent(b, sb.String(), ""))
}

// allocAtStart records the bytes allocated so far when each iteration
// starts (an event consumer of the run's iteration.start events).
type allocAtStart struct{ total []uint64 }

func (o *allocAtStart) Consume(e event.Event) {
	if e.Kind != event.KindIterationStart {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	o.total = append(o.total, ms.TotalAlloc)
}

// BenchmarkIterationByRunLength measures whether an iteration costs more
// the longer the run: one op is a run of 99 iterations (the loop's hard
// limit is 100) in one session through the script provider, and the bytes
// allocated by iterations 1–10 and 89–98 are reported per iteration. A
// per-query copy of the transcript makes the late figure grow with the
// session; it should stay within 10 % of the early one.
func BenchmarkIterationByRunLength(b *testing.B) {
	const iterationsPerRun = 99
	def := textTurnsAgent(b, iterationsPerRun)
	ctx := context.Background()
	var early, late uint64
	for i := 0; i < b.N; i++ {
		obs := &allocAtStart{}
		a, err := Build(ctx, def, BuildOptions{WorkDir: b.TempDir(), MaxIterations: iterationsPerRun, Events: []event.Consumer{obs}})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			b.Fatal(err)
		}
		a.Run(ctx)
		if res := a.Stop(); res.Iterations != iterationsPerRun {
			b.Fatalf("%+v", res)
		}
		// total[k] is the allocation count when iteration k+1 started.
		early += obs.total[10] - obs.total[0]
		late += obs.total[98] - obs.total[88]
	}
	n := float64(b.N * 10)
	b.ReportMetric(float64(early)/n, "B/iter-1-10")
	b.ReportMetric(float64(late)/n, "B/iter-89-98")
	b.ReportMetric(float64(late)/float64(early), "late/early")
}
