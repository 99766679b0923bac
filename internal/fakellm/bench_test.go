package fakellm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	asdk "github.com/anthropics/anthropic-sdk-go"
	aopt "github.com/anthropics/anthropic-sdk-go/option"
	osdk "github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/anthropic"
	"github.com/capstan-dev/capstan/llm/openai"
	"github.com/capstan-dev/capstan/tool"
)

// probe is a trivial read tool for the stateless tool-call benchmark.
type probe struct{}

func (probe) Spec() tool.Spec {
	return tool.Spec{Name: "probe", Description: "returns ok", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
}
func (probe) Kind() tool.Kind { return tool.KindRead }
func (probe) Run(context.Context, json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: "ok"}, nil
}

func model(b *testing.B, d fakellm.Dialect, srv *fakellm.Server) llm.Model {
	b.Helper()
	var (
		m   llm.Model
		err error
	)
	if d == fakellm.Anthropic {
		m, err = anthropic.New(anthropic.Config{APIKey: "k", BaseURL: srv.URL, Model: "bench", HTTPClient: srv.Client()})
	} else {
		m, err = openai.New(openai.Config{APIKey: "k", BaseURL: srv.URL, Model: "bench", HTTPClient: srv.Client()})
	}
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// bareCall is one streamed request with the official client and nothing
// of capstan around it.
func bareCall(b *testing.B, d fakellm.Dialect, srv *fakellm.Server) func() {
	if d == fakellm.Anthropic {
		c := asdk.NewClient(aopt.WithoutEnvironmentDefaults(), aopt.WithBaseURL(srv.URL), aopt.WithAPIKey("k"),
			aopt.WithHTTPClient(srv.Client()), aopt.WithMaxRetries(0))
		params := asdk.MessageNewParams{Model: "bench", MaxTokens: 1024,
			Messages: []asdk.MessageParam{asdk.NewUserMessage(asdk.NewTextBlock("hello"))}}
		return func() {
			st := c.Messages.NewStreaming(context.Background(), params)
			var acc asdk.Message
			for st.Next() {
				_ = acc.Accumulate(st.Current())
			}
			if err := st.Err(); err != nil {
				b.Fatal(err)
			}
			st.Close()
		}
	}
	c := osdk.NewClient(oopt.WithBaseURL(srv.URL), oopt.WithAPIKey("k"), oopt.WithHTTPClient(srv.Client()), oopt.WithMaxRetries(0))
	params := osdk.ChatCompletionNewParams{Model: "bench", Messages: []osdk.ChatCompletionMessageParamUnion{osdk.UserMessage("hello")},
		StreamOptions: osdk.ChatCompletionStreamOptionsParam{IncludeUsage: osdk.Bool(true)}}
	return func() {
		st := c.Chat.Completions.NewStreaming(context.Background(), params)
		var acc osdk.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			b.Fatal(err)
		}
		st.Close()
	}
}

// BenchmarkTurn compares one streamed text turn made with the bare official
// client against the same turn through capstan's provider and shared tool
// loop (llm.NewToolLoop → Query), on the same loopback fake server; and a
// four-turn query with three tool calls (stateless fake, K=3), reported per
// model turn.
func BenchmarkTurn(b *testing.B) {
	for _, d := range []fakellm.Dialect{fakellm.Anthropic, fakellm.OpenAI} {
		b.Run(string(d)+"/bare-client", func(b *testing.B) {
			srv := fakellm.Start(d, fakellm.Options{NoRecord: true, Respond: func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "hi there"} }})
			defer srv.Close()
			call := bareCall(b, d, srv)
			b.ReportAllocs()
			cpu0 := testenv.ProcessCPUTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				call()
			}
			reportCPU(b, cpu0)
		})
		b.Run(string(d)+"/capstan-toolloop", func(b *testing.B) {
			srv := fakellm.Start(d, fakellm.Options{NoRecord: true, Respond: func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "hi there"} }})
			defer srv.Close()
			loop := llm.NewToolLoop(model(b, d, srv), llm.Config{})
			b.ReportAllocs()
			cpu0 := testenv.ProcessCPUTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := loop.Query(context.Background(), "hello", llm.QueryOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0)
		})
		for _, side := range []string{"bare-client", "capstan-toolloop"} {
			b.Run(fmt.Sprintf("%s/concurrent=%d/%s", d, concurrentRuns, side), func(b *testing.B) {
				srv := fakellm.Start(d, fakellm.Options{NoRecord: true, Respond: func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "hi there"} }})
				defer srv.Close()
				call := bareCall(b, d, srv)
				if side == "capstan-toolloop" {
					loop := llm.NewToolLoop(model(b, d, srv), llm.Config{})
					call = func() {
						if _, err := loop.Query(context.Background(), "hello", llm.QueryOptions{}); err != nil {
							b.Error(err)
						}
					}
				}
				runConcurrently(b, call)
			})
		}
		b.Run(string(d)+"/capstan-3-tool-calls", func(b *testing.B) {
			srv := fakellm.Start(d, fakellm.Options{NoRecord: true, Stateless: 3})
			defer srv.Close()
			loop := llm.NewToolLoop(model(b, d, srv), llm.Config{Tools: []tool.Tool{probe{}}})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := loop.Query(context.Background(), "hello", llm.QueryOptions{})
				if err != nil || res.Turns != 4 {
					b.Fatal(err, res)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*4), "ns/turn")
		})
	}
}

// concurrentRuns is how many runs the concurrent turn benchmarks keep
// going at once.
const concurrentRuns = 100

// runConcurrently makes b.N calls from concurrentRuns goroutines at once
// (each turn of a run after the other, as many runs side by side) and
// reports the throughput in turns per second and the process CPU time
// per turn.
func runConcurrently(b *testing.B, call func()) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := testenv.ProcessCPUTime()
	b.ResetTimer()
	for range concurrentRuns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				call()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
	reportCPU(b, cpu0)
}

// reportCPU reports the process CPU time per op since cpu0 (the fake
// server's included): other work on a shared machine stretches the wall
// clock, much less the CPU time.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((testenv.ProcessCPUTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/turn")
}

// BenchmarkParkedAgents measures the memory of agents parked in a model
// call: N goroutines each run a query through the shared tool loop while
// the (in-memory) fake server holds every response; once all N requests
// have arrived, heap-in-use + stack-in-use and the goroutine count are
// sampled and divided by N. Both sides of each connection (client and fake
// server) are included. One measurement per iteration; run with
// -benchtime=1x.
//
// The raw-http variant parks a plain net/http POST (no SDK, no capstan) on
// the same fake server: the floor that transport and fake server cost.
func BenchmarkParkedAgents(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, d := range []fakellm.Dialect{fakellm.Anthropic, fakellm.OpenAI} {
			b.Run(fmt.Sprintf("%s/%d", d, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					parked(b, d, n, false)
				}
			})
		}
		b.Run(fmt.Sprintf("raw-http/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				parked(b, fakellm.Anthropic, n, true)
			}
		})
	}
}

func memNow() (uint64, int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse, runtime.NumGoroutine()
}

func parked(b *testing.B, d fakellm.Dialect, n int, raw bool) {
	var arrived atomic.Int64
	srv := fakellm.Start(d, fakellm.Options{InMemory: true, NoRecord: true, Respond: func(fakellm.Request) fakellm.Reply {
		arrived.Add(1)
		return fakellm.Reply{Text: "late", Delay: time.Hour}
	}})
	defer srv.Close()
	loop := llm.NewToolLoop(model(b, d, srv), llm.Config{})
	hc := srv.Client()
	body := `{"model":"bench","max_tokens":16,"messages":[{"role":"user","content":"park"}]}`
	baseMem, baseG := memNow()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if raw {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set("x-api-key", "k")
				if resp, err := hc.Do(req); err == nil {
					resp.Body.Close()
				}
				return
			}
			_, _ = loop.Query(ctx, "park", llm.QueryOptions{})
		}()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for arrived.Load() < int64(n) {
		if time.Now().After(deadline) {
			cancel()
			b.Fatalf("only %d of %d agents reached the server", arrived.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mem, g := memNow()
	cancel()
	wg.Wait()
	b.ReportMetric(float64(mem-baseMem)/float64(n), "B/agent")
	b.ReportMetric(float64(g-baseG)/float64(n), "goroutines/agent")
}
