package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/temporaltest"
	"github.com/capstan-dev/capstan/scaleout"
)

// BenchmarkTemporalThroughput measures runs per minute of a short agent
// (examples/hello: two iterations, four tool calls) the way a user runs
// many: locally one `capstan run` after another, and on Temporal with one
// `capstan submit --each` of all the runs and one or two `capstan worker`
// processes, all on this machine and a dev server. Each round runs the
// modes one after another, so they see the same load; it reports each
// one's runs/min and the Temporal figures over local's.
//
//	go test ./cmd/capstan/clustertest -run '^$' -bench TemporalThroughput -benchtime 3x
//
// CAPSTAN_BENCH_RUNS sets the runs per mode and round (default 40);
// CAPSTAN_BENCH_WORKERS the most workers (default 2: one, then two);
// CAPSTAN_BENCH_CONCURRENT passes --max-concurrent to the workers,
// CAPSTAN_BENCH_CHAIN_FOR --chain-for to the submit.
func BenchmarkTemporalThroughput(b *testing.B) {
	runs := 40
	if v, err := strconv.Atoi(os.Getenv("CAPSTAN_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	most := 2
	if v, err := strconv.Atoi(os.Getenv("CAPSTAN_BENCH_WORKERS")); err == nil && v > 0 {
		most = v
	}
	var workerArgs []string
	if v := os.Getenv("CAPSTAN_BENCH_CONCURRENT"); v != "" {
		workerArgs = []string{"--max-concurrent", v}
	}
	addr := temporaltest.Server(b)
	c, err := scaleout.Dial(context.Background(), addr, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	names := make([]string, runs)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	stdin := strings.Join(names, "\n") + "\n"
	// By workers; [0] = local.
	local, temporal := make([]time.Duration, 1), make([]time.Duration, most+1)
	cpu, serverCPU := make([]time.Duration, most+1), make([]time.Duration, most+1)
	for b.Loop() {
		// Local: one run after another, each in a work dir of its own.
		wds := make([]string, runs)
		for i := range wds {
			wds[i] = b.TempDir()
			gitT(b, wds[i], "init", "-q")
		}
		start, cpu0 := time.Now(), childrenCPU()
		for i, wd := range wds {
			cmd := cliCommand("run", "../../../examples/hello", "--workdir", wd, "--quiet", "--name", names[i])
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("capstan run: %v\n%s", err, out)
			}
		}
		local[0] += time.Since(start)
		cpu[0] += childrenCPU() - cpu0
		for workers := 1; workers <= most; workers++ {
			_, wd := sharedRepo(b)
			roots := b.TempDir()
			ws := make([]*tworker, workers)
			for i := range ws {
				ws[i] = startWorker(b, addr, filepath.Join(roots, strconv.Itoa(i)), workerArgs...)
			}
			start, cpu0, server0 := time.Now(), childrenCPU(), serverProcessCPU(b)
			args := []string{"submit", "../../../examples/hello", "--temporal", addr, "--workdir", wd, "--each", "name"}
			if v := os.Getenv("CAPSTAN_BENCH_CHAIN_FOR"); v != "" {
				args = append(args, "--chain-for", v)
			}
			submit := cliCommand(args...)
			submit.Stdin = strings.NewReader(stdin)
			out, err := submit.Output()
			if err != nil {
				b.Fatalf("capstan submit: %v", err)
			}
			ids := strings.Fields(string(out))
			if len(ids) != runs {
				b.Fatalf("submit printed %d run ids, want %d", len(ids), runs)
			}
			for _, id := range ids {
				var res event.RunResult
				if err := c.GetWorkflow(context.Background(), id, "").Get(context.Background(), &res); err != nil || !res.Success {
					b.Fatalf("run %s: %v %+v", id, err, res)
				}
			}
			temporal[workers] += time.Since(start)
			serverCPU[workers] += serverProcessCPU(b) - server0
			for _, w := range ws {
				_ = w.Cmd.Process.Signal(syscall.SIGTERM)
				<-w.Exited
				w.Exited <- nil // for the cleanup's wait
			}
			cpu[workers] += childrenCPU() - cpu0
		}
	}
	perMin := func(d time.Duration) float64 { return float64(runs*b.N) / d.Minutes() }
	perRun := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(runs*b.N) }
	b.ReportMetric(perMin(local[0]), "local-runs/min")
	b.ReportMetric(perRun(cpu[0]), "local-cpu-ms/run")
	var server time.Duration
	for n := 1; n <= most; n++ {
		name := fmt.Sprintf("%dworkers", n)
		if n == 1 {
			name = "1worker"
		}
		b.ReportMetric(perMin(temporal[n]), name+"-runs/min")
		b.ReportMetric(perMin(temporal[n])/perMin(local[0]), name+"/local")
		b.ReportMetric(perRun(cpu[n]), name+"-cpu-ms/run")
		server += serverCPU[n]
	}
	b.ReportMetric(perRun(server)/float64(most), "server-cpu-ms/run")
	b.ReportMetric(0, "ns/op")
}

// childrenCPU is the user and system CPU time of this process's children
// that have ended (and of their own children).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverProcessCPU is the CPU time so far of the dev server this process
// started (the temporal child process).
func serverProcessCPU(b *testing.B) time.Duration {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "(temporal") {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 13 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(utime+stime) * time.Second / 100 // clock ticks (USER_HZ 100)
	}
	b.Log("the dev server's process was not found")
	return 0
}
