package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/llm"
	_ "github.com/capstan-dev/capstan/llm/script" // the example's own provider, for validation
)

// blockingModel is an in-process model whose every call blocks until its
// context ends (a model call that is still thinking); arrived counts the
// calls that reached it.
type blockingModel struct{ arrived *atomic.Int64 }

func (m blockingModel) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	m.arrived.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

var parkArrived atomic.Int64

func init() {
	llm.RegisterModel("parkbench", func(context.Context, llm.Config) (llm.Model, error) {
		return blockingModel{&parkArrived}, nil
	})
}

// BenchmarkParkedAgents parks n agents (agent.Build, Start and Run with
// the journal on; "public": agent.Load once and agent.New per agent, as
// the README builds one) in a model call that blocks, and reports heap + stack in
// use per agent once all have arrived — everything the agent holds, from
// before Build — then the heap and the stack apart, and goroutines per
// agent. The floor, measured in the same run, is n goroutines blocked in
// the same model call without an agent around it. One measurement per op;
// run with -benchtime 1x.
//
//	go test ./internal/bench -run XXX -bench ParkedAgents -benchtime 1x
func BenchmarkParkedAgents(b *testing.B) {
	dir := filepath.Join(moduleRoot(b), "examples", "hello")
	def, err := agentdir.LoadAndValidate(dir, agent.ValidateOptions())
	if err != nil {
		b.Fatal(err)
	}
	// The way the README tells a user to build an agent from a folder:
	// agent.Load reads it once into a pinned snapshot, agent.New builds
	// each agent from the Config it returns.
	loaded, err := agent.Load(dir, agent.Config{Model: "parkbench:m", MaxIterations: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("agent/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				parkAgents(b, n, func(ctx context.Context, work string) (*agent.Agent, error) {
					return agent.Build(ctx, def, agent.BuildOptions{WorkDir: work, Model: "parkbench:m", MaxIterations: 1})
				})
			}
		})
		b.Run(fmt.Sprintf("public/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				parkAgents(b, n, func(ctx context.Context, work string) (*agent.Agent, error) {
					cfg := loaded
					cfg.WorkDir = work
					return agent.New(ctx, cfg)
				})
			}
		})
		b.Run(fmt.Sprintf("floor/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				parkCalls(b, n)
			}
		})
	}
}

// memUse is heap and stack in use, and the goroutines, at one moment.
type memUse struct {
	heap, stack uint64
	goroutines  int
}

func memNow() memUse {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memUse{ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine()}
}

func waitArrived(b *testing.B, want int64) {
	deadline := time.Now().Add(5 * time.Minute)
	for parkArrived.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d calls arrived", parkArrived.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// report reports what the n parked agents (or calls) hold since m0:
// heap + stack (B/agent), and each part.
func report(b *testing.B, n int, m0 memUse) {
	m1 := memNow()
	per := func(a, b uint64) float64 { return float64(int64(a)-int64(b)) / float64(n) }
	b.ReportMetric(per(m1.heap+m1.stack, m0.heap+m0.stack), "B/agent")
	b.ReportMetric(per(m1.heap, m0.heap), "heap-B/agent")
	b.ReportMetric(per(m1.stack, m0.stack), "stack-B/agent")
	b.ReportMetric(float64(m1.goroutines-m0.goroutines)/float64(n), "goroutines/agent")
}

// parkAgents parks n agents that build makes, each in its own work dir.
func parkAgents(b *testing.B, n int, build func(ctx context.Context, work string) (*agent.Agent, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	root := b.TempDir()
	parkArrived.Store(0)
	m0 := memNow()
	writeParkedProfile(b, fmt.Sprintf("%d.before", n))
	agents := make([]*agent.Agent, n)
	for i := range agents {
		work := filepath.Join(root, fmt.Sprint(i))
		if err := os.Mkdir(work, 0o755); err != nil {
			b.Fatal(err)
		}
		a, err := build(ctx, work)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			b.Fatal(err)
		}
		agents[i] = a
	}
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); a.Run(ctx) }()
	}
	waitArrived(b, int64(n))
	report(b, n, m0)
	writeParkedProfile(b, fmt.Sprint(n))
	cancel()
	wg.Wait()
	for _, a := range agents {
		a.Stop()
	}
}

// writeParkedProfile writes a heap profile to the file
// CAPSTAN_BENCH_PARKED_PROFILE names, with tag (the agent count, and
// ".before" for the one taken before the agents are built) before its
// extension, when it is set: -memprofile is written after the agents are
// gone. The profile taken at the park point less the one taken before
// (pprof -diff_base) is what the agents hold. Run with -memprofilerate 1
// to count every allocation.
func writeParkedProfile(b *testing.B, tag string) {
	name := os.Getenv("CAPSTAN_BENCH_PARKED_PROFILE")
	if name == "" {
		return
	}
	ext := filepath.Ext(name)
	f, err := os.Create(fmt.Sprintf("%s.%s%s", strings.TrimSuffix(name, ext), tag, ext))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

func parkCalls(b *testing.B, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	m := blockingModel{&parkArrived}
	parkArrived.Store(0)
	m0 := memNow()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.Generate(ctx, &llm.Request{})
		}()
	}
	waitArrived(b, int64(n))
	report(b, n, m0)
	cancel()
	wg.Wait()
}
