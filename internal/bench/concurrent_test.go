package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	asdk "github.com/anthropics/anthropic-sdk-go"
	aopt "github.com/anthropics/anthropic-sdk-go/option"
	osdk "github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
	_ "github.com/capstan-dev/capstan/llm/anthropic" // the providers the runs talk to
	_ "github.com/capstan-dev/capstan/llm/openai"
)

// concurrentRuns is how many runs BenchmarkConcurrentRuns keeps going at
// once.
const concurrentRuns = 100

// helloReply answers examples/hello's two steps: the greeting step's
// keyword on its prompt, the completion keyword on the review step's, so
// that a run is two iterations of one text turn each.
func helloReply(r fakellm.Request) fakellm.Reply {
	if strings.Contains(r.LastUserText, "Read `greeting.txt` back") {
		return fakellm.Reply{Text: "The file has both lines. HELLO_DONE"}
	}
	return fakellm.Reply{Text: "I wrote greeting.txt. GREETING_WRITTEN"}
}

// BenchmarkConcurrentRuns runs examples/hello as whole agent runs —
// agent.New from the Config agent.Load returned, Start, Run with the
// journal on, Stop, each in its own work dir — concurrentRuns at once
// against a loopback fake server (real HTTP and SSE), and next to them,
// in the same process against the same kind of server, a bare SDK loop
// that makes the same turns: the request bodies the agent sent (recorded
// from one run first, decoded into the SDK's own parameter types) streamed
// with the official client one after the other, concurrentRuns loops at
// once. An op is one run; it reports runs and turns per second and the
// process CPU time per run (the fake server's included, the same on both
// sides).
//
//	go test ./internal/bench -run XXX -bench 'ConcurrentRuns/openai' -benchtime 300x
func BenchmarkConcurrentRuns(b *testing.B) {
	dir := filepath.Join(moduleRoot(b), "examples", "hello")
	for _, d := range []fakellm.Dialect{fakellm.OpenAI, fakellm.Anthropic} {
		srv := fakellm.Start(d, fakellm.Options{Respond: helloReply})
		cfg, err := agent.Load(dir, agent.Config{Model: string(d) + ":bench", BaseURL: srv.URL, Getenv: benchEnv})
		if err != nil {
			b.Fatal(err)
		}
		newRun := func(root string) error {
			run := cfg
			run.Store = journal.Store{Dir: filepath.Join(root, "state")}
			if run.WorkDir, err = os.MkdirTemp(root, "work"); err != nil {
				return err
			}
			a, err := agent.New(context.Background(), run)
			if err != nil {
				return err
			}
			if err := a.Start(context.Background()); err != nil {
				return err
			}
			a.Run(context.Background())
			if res := a.Stop(); res.CompletionReason != "completed" || res.Iterations != 2 {
				return fmt.Errorf("run: %s after %d iterations: %s", res.CompletionReason, res.Iterations, res.Reason)
			}
			return nil
		}
		// One run first, recorded: the bare loop makes its turns.
		if err := newRun(b.TempDir()); err != nil {
			b.Fatal(err)
		}
		var bodies [][]byte
		for _, r := range srv.Requests() {
			bodies = append(bodies, r.Body)
		}
		srv.Close()
		if len(bodies) != 2 {
			b.Fatalf("%s: the run made %d requests, want 2", d, len(bodies))
		}
		turns := len(bodies)

		b.Run(string(d)+"/bare-sdk-loop", func(b *testing.B) {
			srv := fakellm.Start(d, fakellm.Options{NoRecord: true, Respond: helloReply})
			defer srv.Close()
			run := bareLoop(b, d, srv, bodies)
			runConcurrently(b, turns, run)
		})
		b.Run(string(d)+"/agent-run", func(b *testing.B) {
			srv := fakellm.Start(d, fakellm.Options{NoRecord: true, Respond: helloReply})
			defer srv.Close()
			cfg.BaseURL = srv.URL
			root := b.TempDir()
			runConcurrently(b, turns, func() {
				if err := newRun(root); err != nil {
					b.Error(err)
				}
			})
		})
	}
}

// benchEnv is the environment the benchmark's agents see: a key for the
// fake server and nothing else.
func benchEnv(k string) string {
	switch k {
	case "OPENAI_API_KEY", "ANTHROPIC_API_KEY":
		return "k"
	}
	return ""
}

// bareLoop returns a run of the bare official client: bodies decoded into
// the SDK's request parameters, each streamed and accumulated in turn.
func bareLoop(b *testing.B, d fakellm.Dialect, srv *fakellm.Server, bodies [][]byte) func() {
	if d == fakellm.Anthropic {
		c := asdk.NewClient(aopt.WithoutEnvironmentDefaults(), aopt.WithBaseURL(srv.URL), aopt.WithAPIKey("k"), aopt.WithMaxRetries(0))
		params := make([]asdk.MessageNewParams, len(bodies))
		for i, body := range bodies {
			if err := params[i].UnmarshalJSON(body); err != nil {
				b.Fatal(err)
			}
		}
		return func() {
			for _, p := range params {
				st := c.Messages.NewStreaming(context.Background(), p)
				var acc asdk.Message
				for st.Next() {
					_ = acc.Accumulate(st.Current())
				}
				if err := st.Err(); err != nil {
					b.Error(err)
				}
				st.Close()
			}
		}
	}
	c := osdk.NewClient(oopt.WithBaseURL(srv.URL), oopt.WithAPIKey("k"), oopt.WithMaxRetries(0))
	params := make([]osdk.ChatCompletionNewParams, len(bodies))
	for i, body := range bodies {
		if err := params[i].UnmarshalJSON(body); err != nil {
			b.Fatal(err)
		}
	}
	return func() {
		for _, p := range params {
			st := c.Chat.Completions.NewStreaming(context.Background(), p)
			var acc osdk.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				b.Error(err)
			}
			st.Close()
		}
	}
}

// runConcurrently makes b.N runs from concurrentRuns
// goroutines at once, each run after the other in its goroutine, and
// reports runs and turns (turns per run) per second and the process CPU
// time per run.
func runConcurrently(b *testing.B, turns int, run func()) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := testenv.ProcessCPUTime()
	start := time.Now()
	b.ResetTimer()
	for range concurrentRuns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				run()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)/secs, "runs/s")
	b.ReportMetric(float64(b.N*turns)/secs, "turns/s")
	b.ReportMetric(float64((testenv.ProcessCPUTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/run")
}
