package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Emit(p event.Payload) {
	t := string(p.EventKind())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, t)
}

// A violation under FailOnViolation cancels stages running beside it and
// starts nothing else; each stage has one audit record saying what happened.
func TestStopCancelsRunningAndSkipsRest(t *testing.T) {
	started := make(chan struct{})
	rec := &recorder{}
	m := New(Config{Options: DefaultExecutionOptions(), MaxParallel: 2, Events: rec})
	_ = m.RegisterAgent(fn("long", nil, []string{"k.long"}, func(ctx context.Context, ac *AgentContext) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	_ = m.RegisterAgent(fn("bad", nil, []string{"k.bad"}, func(ctx context.Context, ac *AgentContext) error {
		<-started
		return nil // promised k.bad, wrote nothing
	}))
	_ = m.RegisterAgent(fn("later", []string{"k.bad"}, []string{"k.later"}, setAll(map[string]any{"k.later": 1})))
	out, err := m.Execute(context.Background(), nil)
	if agenterr.CodeOf(err) != agenterr.CodeContractViolation {
		t.Fatalf("err = %v", err)
	}
	runs := decode[[]AgentRun](t, out, KeyAgentRuns)
	st := map[string]string{}
	for _, r := range runs {
		st[r.AgentID] = r.Status
	}
	if len(runs) != 3 || st["long"] != StatusCanceled || st["bad"] != StatusViolated || st["later"] != StatusSkipped {
		t.Fatalf("runs %+v", runs)
	}
	if len(rec.events) != 3 || rec.events[0] != string(event.KindPipelineStage) {
		t.Fatalf("events %v", rec.events)
	}
}

// A postcondition violation is retried like an error; the retry can succeed.
func TestPostconditionRetried(t *testing.T) {
	var calls atomic.Int32
	m := New(Config{Options: AgentExecutionOptions{ValidateContract: true, FailOnViolation: true}})
	_ = m.RegisterStage(fn("model_like", nil, []string{"k.v"}, func(_ context.Context, ac *AgentContext) error {
		if calls.Add(1) == 1 {
			return ac.Set("k.v", []any{})
		}
		return ac.Set("k.v", []any{1})
	}), StageConfig{Retry: RetryPolicy{MaxRetries: 1, Backoff: time.Millisecond}})
	out, err := m.Execute(context.Background(), nil)
	if err != nil || calls.Load() != 2 {
		t.Fatalf("err %v calls %d", err, calls.Load())
	}
	if vs := decode[[]event.PipelineViolation](t, out, KeyViolations); len(vs) != 0 {
		t.Fatalf("violations of a retried attempt leaked: %v", vs)
	}
}

func TestTimeoutOfContextAwareStage(t *testing.T) {
	m := New(Config{Options: AgentExecutionOptions{FailOnViolation: true}})
	_ = m.RegisterStage(fn("polite", nil, []string{"k.v"}, func(ctx context.Context, ac *AgentContext) error {
		<-ctx.Done()
		return ctx.Err()
	}), StageConfig{Timeout: 10 * time.Millisecond})
	out, err := m.Execute(context.Background(), nil)
	if !errors.Is(err, agenterr.ErrStageTimeout) {
		t.Fatalf("err = %v", err)
	}
	if out.Has(KeyPerformance) {
		t.Fatal("performance written with TrackPerformance off")
	}
}

func TestBackoffGrowsAndIsBounded(t *testing.T) {
	r := RetryPolicy{Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		w *= time.Millisecond
		if lo, hi := backoffDelay(r, i+1, 0), backoffDelay(r, i+1, 1); lo != w/2 || hi != w {
			t.Errorf("retry %d: [%v, %v], want [%v, %v]", i+1, lo, hi, w/2, w)
		}
	}
	if d := backoffDelay(RetryPolicy{}, 1, 1); d != DefaultBackoff {
		t.Errorf("default %v", d)
	}
	if d := backoffDelay(RetryPolicy{}, 60, 1); d != DefaultMaxBackoff {
		t.Errorf("no overflow: %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if sleepBackoff(ctx, RetryPolicy{Backoff: time.Hour}, 1) {
		t.Fatal("canceled sleep reported success")
	}
}

// A stage that fails leaves none of its writes behind, even in warn mode.
func TestFailedStageWritesDiscarded(t *testing.T) {
	m := newM(t, AgentExecutionOptions{ValidateContract: true},
		fn("half", nil, []string{"k.a", "k.b"}, func(_ context.Context, ac *AgentContext) error {
			if err := ac.Set("k.a", 1); err != nil {
				return err
			}
			return errors.New("disk full")
		}))
	out, err := m.Execute(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Has("k.a") {
		t.Fatal("partial write of a failed stage was kept")
	}
	if ws := decode[[]WriteRecord](t, out, KeyWrites); len(ws) != 0 {
		t.Fatalf("audit lists writes of a failed stage: %+v", ws)
	}
}

func TestMergeReducerAndMisfit(t *testing.T) {
	m := NewReasoningManager(Config{Options: DefaultExecutionOptions(), Keys: []KeySpec{
		{Name: "k.obj", Type: TypeObject, Reducer: ReduceMerge},
		{Name: "k.any", Reducer: ReduceAppend},
	}})
	_ = m.RegisterAgent(fn("first", nil, []string{"k.obj", "k.any"}, setAll(map[string]any{"k.obj": map[string]any{"a": 1, "b": 1}, "k.any": []int{1}})))
	_ = m.RegisterAgent(fn("second", nil, []string{"k.obj", "k.any"}, setAll(map[string]any{"k.obj": map[string]any{"b": 2, "c": 2}, "k.any": "not an array"})))
	if got := m.Stages(); len(got) != 2 || got[0] != "first" {
		t.Fatalf("stages %v", got)
	}
	out, err := m.Execute(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decode[map[string]int](t, out, "k.obj"); got["a"] != 1 || got["b"] != 2 || got["c"] != 2 {
		t.Fatalf("merged %v", got)
	}
	warns := decode[[]string](t, out, KeyWarnings)
	if len(warns) != 1 || !strings.Contains(warns[0], "agent second: k.any: append reducer needs arrays, got string; contribution dropped") {
		t.Fatalf("warnings %v", warns)
	}
	if got := decode[[]int](t, out, "k.any"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("k.any = %v", got)
	}
	// A reducer that does not fit the key's type is a compile error.
	m2 := New(Config{Keys: []KeySpec{{Name: "k.s", Type: TypeString, Reducer: ReduceAppend}, {Name: "k.t", Type: "list"}, {Name: "k.r", Reducer: "sum"}}})
	_ = m2.RegisterAgent(fn("w", nil, []string{"k.s"}, nil))
	_, err = m2.Compile()
	if err == nil || !strings.Contains(err.Error(), "reducer append does not fit type string") || !strings.Contains(err.Error(), `unknown type "list"`) || !strings.Contains(err.Error(), `unknown reducer "sum"`) {
		t.Fatalf("err = %v", err)
	}
}

// The compiled plan is cached per input key set and dropped on registration.
func TestPlanCacheInvalidation(t *testing.T) {
	m := newM(t, DefaultExecutionOptions(), fn("a", nil, []string{"k.a"}, setAll(map[string]any{"k.a": 1})))
	if _, err := m.Execute(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	_ = m.RegisterAgent(fn("b", []string{"k.a"}, []string{"k.b"}, setAll(map[string]any{"k.b": 2})))
	out, err := m.Execute(context.Background(), nil)
	if err != nil || !out.Has("k.b") {
		t.Fatalf("new stage did not run: %v", err)
	}
	// A different input key set compiles separately: input.x now satisfies c.
	_ = m.RegisterAgent(fn("c", []string{"input.x"}, []string{"k.c"}, setAll(map[string]any{"k.c": 3})))
	if _, err := m.Execute(context.Background(), nil); agenterr.CodeOf(err) != agenterr.CodePipelineCompile {
		t.Fatalf("err = %v", err)
	}
	if out, err := m.Execute(context.Background(), input(t, "x", "1")); err != nil || !out.Has("k.c") {
		t.Fatalf("err = %v", err)
	}
}
