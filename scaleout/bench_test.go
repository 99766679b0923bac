package scaleout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/temporaltest"
)

// benchIterations is the length of the benchmark agent's runs.
const benchIterations = 5

// benchAgent writes an agent that runs benchIterations iterations, each
// one Bash call appending a line to log.txt, and completes when a command
// validator sees them all.
func benchAgent(b *testing.B) *agentdir.Agent {
	b.Helper()
	dir := b.TempDir()
	var script strings.Builder
	script.WriteString("turns:\n")
	for i := 1; i <= benchIterations; i++ {
		fmt.Fprintf(&script, "  - tool_calls: [{name: Bash, input: {command: \"echo line-%d >> log.txt\"}}]\n", i)
		if i < benchIterations {
			fmt.Fprintf(&script, "  - text: \"line %d\"\n", i)
		} else {
			script.WriteString("  - text: \"BENCH_DONE\"\n")
		}
	}
	files := map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "bench", "description": "one Bash call per iteration",
  "runner": {"model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "BENCH_DONE", "validators": ["all-lines"]},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}}}`,
		"steps_registry.json": fmt.Sprintf(`{"agentId": "bench", "c1": "steps", "entryStep": "s",
  "validators": {"all-lines": {"type": "command", "command": "test \"$(wc -l < log.txt)\" -eq %d", "successWhen": "exitCode:0", "failurePattern": "short"}},
  "completionPatterns": {"short": {"description": "lines missing", "edition": "failed"}},
  "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`, benchIterations),
		"prompts/steps/work/main/f_default.md": "Iteration {uv-iteration}: append a line.",
		"prompts/steps/work/main/f_failed.md":  "Lines are missing.",
		"script.yaml":                          script.String(),
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	def, err := agent.LoadPinned(dir)
	if err != nil {
		b.Fatal(err)
	}
	return def
}

// benchRepo makes a shared bare repository and a work dir cloned from it.
func benchRepo(b *testing.B) (bare, wd string) {
	base := b.TempDir()
	bare = filepath.Join(base, "origin.git")
	gitT(b, base, "init", "-q", "--bare", bare)
	wd = filepath.Join(base, "work")
	gitT(b, base, "clone", "-q", "file://"+bare, wd)
	if err := os.WriteFile(filepath.Join(wd, "README"), []byte("x\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	gitT(b, wd, "add", "README")
	gitT(b, wd, "commit", "-q", "-m", "init")
	return bare, wd
}

// startWorkers runs n in-process workers against addr until b ends.
func startWorkers(b *testing.B, c client.Client, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		ready := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := RunWorker(ctx, c, WorkerConfig{Root: filepath.Join(b.TempDir(), "root"), Store: testStore(b), MaxConcurrentRuns: 16,
				Ready: func(string) { close(ready) }})
			if err != nil {
				b.Error(err)
			}
		}()
		<-ready
	}
	b.Cleanup(func() { cancel(); wg.Wait() })
}

func historyBytes(b *testing.B, c client.Client, id string) int {
	n := 0
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		n += proto.Size(ev)
	}
	return n
}

// BenchmarkRun runs the same five-iteration agent locally and on Temporal
// (a dev server and two in-process workers on this machine): the time per
// iteration of each, and the workflow history bytes per iteration.
func BenchmarkRun(b *testing.B) {
	def := benchAgent(b)
	b.Run("local", func(b *testing.B) {
		iterations := 0
		for b.Loop() {
			_, wd := benchRepo(b)
			a, err := agent.New(context.Background(), agent.Config{Agent: def, WorkDir: wd, Store: testStore(b)})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			a.Run(context.Background())
			res := a.Stop()
			if !res.Success {
				b.Fatalf("%+v", res)
			}
			iterations += res.Iterations
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iterations), "ns/iteration")
	})
	b.Run("temporal", func(b *testing.B) {
		addr := temporaltest.Server(b)
		c, err := Dial(context.Background(), addr, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		startWorkers(b, c, 2)
		iterations, hist := 0, 0
		b.ResetTimer()
		for b.Loop() {
			bare, wd := benchRepo(b)
			in, err := PrepareRun(context.Background(), Submission{Agent: def, WorkDir: wd, Repo: "file://" + bare})
			if err != nil {
				b.Fatal(err)
			}
			wr, err := Start(context.Background(), c, "", in)
			if err != nil {
				b.Fatal(err)
			}
			var res event.RunResult
			if err := wr.Get(context.Background(), &res); err != nil || !res.Success {
				b.Fatalf("%v %+v", err, res)
			}
			iterations += res.Iterations
			b.StopTimer()
			hist += historyBytes(b, c, in.RunID)
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iterations), "ns/iteration")
		b.ReportMetric(float64(hist)/float64(iterations), "history-bytes/iteration")
	})
}

// BenchmarkThroughput runs 100 runs of the five-iteration agent: locally,
// two at a time in this process (as two machines each running one local
// run after another would), and on Temporal, all started at once on a dev
// server with two in-process workers; it reports runs and iterations per
// second of each.
func BenchmarkThroughput(b *testing.B) {
	const runs = 100
	def := benchAgent(b)
	b.Run("local", func(b *testing.B) {
		for b.Loop() {
			start := time.Now()
			jobs := make(chan int)
			var wg sync.WaitGroup
			for w := 0; w < 2; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range jobs {
						wd := b.TempDir()
						gitT(b, wd, "init", "-q")
						a, err := agent.New(context.Background(), agent.Config{Agent: def, WorkDir: wd, Store: testStore(b)})
						if err != nil {
							b.Error(err)
							continue
						}
						if err := a.Start(context.Background()); err != nil {
							b.Error(err)
							continue
						}
						a.Run(context.Background())
						if res := a.Stop(); !res.Success || res.Iterations != benchIterations {
							b.Errorf("%+v", res)
						}
					}
				}()
			}
			for i := 0; i < runs; i++ {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			d := time.Since(start)
			b.ReportMetric(runs/d.Seconds(), "runs/s")
			b.ReportMetric(runs*benchIterations/d.Seconds(), "iterations/s")
		}
	})
	b.Run("temporal", func(b *testing.B) {
		addr := temporaltest.Server(b)
		c, err := Dial(context.Background(), addr, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		startWorkers(b, c, 2)
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			bare, wd := benchRepo(b)
			ins := make([]*RunInput, runs)
			for i := range ins {
				if ins[i], err = PrepareRun(context.Background(), Submission{Agent: def, WorkDir: wd, Repo: "file://" + bare}); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			start := time.Now()
			wrs := make([]client.WorkflowRun, runs)
			for i, in := range ins {
				if wrs[i], err = Start(context.Background(), c, "", in); err != nil {
					b.Fatal(err)
				}
			}
			for _, wr := range wrs {
				var res event.RunResult
				if err := wr.Get(context.Background(), &res); err != nil || !res.Success || res.Iterations != benchIterations {
					b.Fatalf("%v %+v", err, res)
				}
			}
			d := time.Since(start)
			b.ReportMetric(runs/d.Seconds(), "runs/s")
			b.ReportMetric(runs*benchIterations/d.Seconds(), "iterations/s")
		}
	})
}
