package verify

import (
	"fmt"
	"github.com/capstan-dev/capstan/event"
	"strings"
	"testing"
)

// goVerbose is go test -v output of n passing tests in one package.
func goVerbose(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "=== RUN   TestCase%d\n    case_test.go:12: checking case %d\n--- PASS: TestCase%d (0.00s)\n", i, i, i)
	}
	b.WriteString("PASS\nok  \texample.com/app\t0.123s\n")
	return b.String()
}

// BenchmarkCompare parses a 2,000-test go test -v run (≈ 190 KB) and
// compares it with a baseline of the same tests: what the no-lost-tests
// check adds to each verification.
func BenchmarkCompare(b *testing.B) {
	out := goVerbose(2000)
	base, _ := ParseTestRun(out)
	bl := &event.TestBaseline{Parsed: true, Run: base}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		now, ok := ParseTestRun(out)
		if _, lost := CompareTestRuns(bl, now, ok); lost {
			b.Fatal("lost")
		}
	}
}
