package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/llm"
)

// Values are copied: changing what was passed to Set, or what Raw returned,
// changes nothing stored.
func TestValuesAreCopied(t *testing.T) {
	ac := NewAgentContext("", "")
	raw := json.RawMessage(`{"a": [1, 2]}`)
	if err := ac.Set("k.raw", raw); err != nil {
		t.Fatal(err)
	}
	raw[2] = 'X'
	got, _ := ac.Raw("k.raw")
	got[0] = '['
	again, _ := ac.Raw("k.raw")
	if string(again) != `{"a":[1,2]}` {
		t.Fatalf("stored value changed: %s", again)
	}
	for _, bad := range []any{make(chan int), []byte("x"), json.RawMessage(`{`), map[string]any{"f": func() {}}} {
		if err := ac.Set("k.bad", bad); err == nil {
			t.Errorf("%T accepted", bad)
		}
	}
	if err := ac.Set("k.big", strings.Repeat("x", MaxValueSize)); err == nil {
		t.Error("oversized value accepted")
	}
	for _, k := range []string{"", "k", "k.", ".k", "k..x", "k.x y", "k.é", strings.Repeat("a", 300) + ".b", "version.x", "audit.x", "metadata.x", "diagnostics.violations"} {
		if err := ac.Set(k, 1); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}

// Template data is data: a request that looks like a template is rendered
// literally, and a model answer that looks like one is stored literally.
func TestTemplateInjection(t *testing.T) {
	m := &replyModel{replies: []llm.Response{text(`{"note":"{{input.secret}} {{#each x}}"}`)}}
	s, err := NewModelStage(ModelStageConfig{Contract: Contract{ID: "n", Post: []string{"custom.note"}}, Model: m,
		Prompt: "Request: {{input.request}} / {{{input.request}}} / {{json input.request}}"})
	if err != nil {
		t.Fatal(err)
	}
	mgr := newM(t, DefaultExecutionOptions(), s)
	in := input(t, "request", "{{input.secret}} <script>", "secret", "hunter2")
	out, err := mgr.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	p := m.reqs[0].Messages[0].Text
	if strings.Contains(p, "hunter2") || !strings.Contains(p, "Request: {{input.secret}} <script> / {{input.secret}} <script> / \"{{input.secret}} <script>\"") {
		t.Fatalf("prompt = %q", p)
	}
	if out.String("custom.note") != "{{input.secret}} {{#each x}}" {
		t.Fatalf("note = %q", out.String("custom.note"))
	}
}

// One manager, many concurrent executions, random DAGs: no races, every
// run complete and deterministic.
func TestConcurrentExecutionsRandomDAG(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 30
	m := New(Config{Options: DefaultExecutionOptions(), MaxParallel: 6,
		Keys: []KeySpec{{Name: "all.trace", Type: TypeArray, Reducer: ReduceAppend}}})
	for i := 0; i < n; i++ {
		var pre []string
		for j := 0; j < i; j++ {
			if rng.IntN(6) == 0 {
				pre = append(pre, fmt.Sprintf("s%d.out", j))
			}
		}
		id := fmt.Sprintf("s%d", i)
		sleep := time.Duration(rng.IntN(300)) * time.Microsecond
		err := m.RegisterAgent(fn(id, pre, []string{id + ".out", "all.trace"}, func(_ context.Context, ac *AgentContext) error {
			time.Sleep(sleep)
			sum := 0
			for _, k := range pre {
				var v int
				if err := ac.Decode(k, &v); err != nil {
					return err
				}
				sum += v
			}
			if err := ac.Set("all.trace", []string{id}); err != nil {
				return err
			}
			return ac.Set(id+".out", sum+1)
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	results := make([]string, 8)
	for r := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := m.Execute(context.Background(), nil)
			if err != nil {
				t.Error(err)
				return
			}
			var last int
			_ = out.Decode(fmt.Sprintf("s%d.out", n-1), &last)
			tr, _ := out.Raw("all.trace")
			results[r] = fmt.Sprint(last, string(tr))
		}()
	}
	wg.Wait()
	for _, r := range results[1:] {
		if r != results[0] {
			t.Fatalf("runs differ:\n%s\n%s", r, results[0])
		}
	}
}

func TestZeroAgentContext(t *testing.T) {
	var ac AgentContext
	if err := ac.Set("k.v", 1); err != nil || !ac.Has("k.v") {
		t.Fatal(err)
	}
	var in AgentContext
	if err := in.SetInput("request", "x"); err != nil || in.String("input.request") != "x" {
		t.Fatal(err)
	}
	out, err := New(Config{}).Execute(context.Background(), &in)
	if err != nil || out.String("input.request") != "x" {
		t.Fatal(err)
	}
}
