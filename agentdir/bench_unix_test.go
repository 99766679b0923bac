//go:build unix

package agentdir

import (
	"fmt"
	"testing"

	"github.com/capstan-dev/capstan/internal/testenv"
)

// BenchmarkValidatePerStep loads and validates registries of 100, 1,000
// and 10,000 chained steps routed by their checks (no structuredGate) and
// reports the cost per step: flat when validation is linear in the
// registry's size.
func BenchmarkValidatePerStep(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			r := chainedRegistry(n)
			dir := writeAgent(b, baseAgent(), r, nil)
			if res := Check(dir, testOpts); !res.Valid() || len(res.Warnings()) != 0 {
				b.Fatalf("fixture:\n%s", dump(res))
			}
			b.ReportAllocs()
			cpu0 := testenv.ProcessCPUTime()
			for b.Loop() {
				if _, err := LoadAndValidate(dir, testOpts); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time (user + system) rather than wall time: other work on a
			// shared machine stretches the wall clock, not the CPU spent.
			b.ReportMetric(float64(testenv.ProcessCPUTime()-cpu0)/float64(b.N)/float64(n), "cpu-ns/step")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/step")
			b.ReportMetric(0, "ns/op")
		})
	}
}
