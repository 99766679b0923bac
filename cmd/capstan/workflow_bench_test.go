package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/temporaltest"
)

// benchIssues is the size of the benchmark's batch.
const benchIssues = 50

// benchWorkflowProject is the test workflow with agents that answer any
// issue: each issue makes three moves (considerer, detailer, iterator)
// and is closed.
func benchWorkflowProject(b *testing.B) string {
	wd := workflowProject(b)
	for name, script := range map[string]string{
		"considerer": `{next_action: {action: closing}, verdict: handoff-detail, final_summary: "Needs a spec first."}`,
		"detailer":   `{next_action: {action: closing}, verdict: handoff-impl, detail_summary: "Add the flag."}`,
	} {
		p := filepath.Join(wd, ".agent", name, "script.yaml")
		if err := os.WriteFile(p, []byte("turns:\n  - structured: "+script+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return wd
}

// benchStore writes benchIssues open issues labelled kind:consider.
func benchStore(b *testing.B) string {
	dir := b.TempDir()
	for n := 1; n <= benchIssues; n++ {
		writeLocalIssue(b, dir, n, `["kind:consider"]`)
	}
	return dir
}

// peakRSS is a process's peak resident set size in MiB (VmHWM).
func peakRSS(b *testing.B, pid int) float64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

// runBatch runs `capstan workflow run` over the benchmark's batch in a
// process and reports its wall time and peak RSS in MiB.
func runBatch(b *testing.B, wd, store string, extra ...string) (time.Duration, float64) {
	args := append([]string{"workflow", "run", "--label", "kind:consider", "--limit", strconv.Itoa(benchIssues),
		"--workdir", wd, "--local", store, "-q"}, extra...)
	cmd := cliCommand(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("workflow run %s: %v\n%s", strings.Join(extra, " "), err, stderr.String())
	}
	wall := time.Since(start)
	for n := 1; n <= benchIssues; n++ {
		if !strings.Contains(readFileT(b, filepath.Join(store, strconv.Itoa(n), "meta.json")), `"closed"`) {
			b.Fatalf("issue %d is not closed", n)
		}
	}
	return wall, float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
}

// BenchmarkWorkflowBatch runs a batch of 50 issues through the
// three-agent test workflow (150 scripted agent runs) one after another
// in one process (`workflow run --local`), then on a Temporal dev server
// with two `capstan worker` processes (`--temporal --concurrency 10`),
// with real agent runs and with --stub-dispatch (the orchestration alone).
// It reports issues per second, and the peak RSS of the local process and
// of the workers.
func BenchmarkWorkflowBatch(b *testing.B) {
	addr := temporaltest.Server(b)
	wd := benchWorkflowProject(b)
	stub := `{"considerer": "handoff-detail", "detailer": "handoff-impl"}`
	report := func(name string, extra ...string) {
		b.Run(name, func(b *testing.B) {
			onTemporal := len(extra) > 0 && extra[0] == "--temporal"
			var workers []*tworker
			if onTemporal {
				// Fresh workers: their peak RSS is this batch's.
				roots := b.TempDir()
				workers = []*tworker{startWorker(b, addr, filepath.Join(roots, "w1")), startWorker(b, addr, filepath.Join(roots, "w2"))}
			}
			b.ResetTimer()
			var wall time.Duration
			var rss float64
			for range b.N {
				w, r := runBatch(b, wd, benchStore(b), extra...)
				wall, rss = wall+w, max(rss, r)
			}
			b.ReportMetric(float64(benchIssues*b.N)/wall.Seconds(), "issues/s")
			b.ReportMetric(rss, "submitter-MiB")
			if onTemporal {
				b.ReportMetric(max(peakRSS(b, workers[0].Cmd.Process.Pid), peakRSS(b, workers[1].Cmd.Process.Pid)), "worker-MiB")
			}
		})
	}
	report("local-sequential")
	report("temporal-concurrency-10", "--temporal", addr, "--concurrency", "10")
	report("local-sequential-stub", "--stub-dispatch", stub)
	report("temporal-concurrency-10-stub", "--temporal", addr, "--concurrency", "10", "--stub-dispatch", stub)
}
