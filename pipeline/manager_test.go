package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

func fn(id string, pre, post []string, f func(ctx context.Context, ac *AgentContext) error) *FuncAgent {
	return &FuncAgent{ID: id, Pre: pre, Post: post, Fn: f}
}

func setAll(vals map[string]any) func(context.Context, *AgentContext) error {
	return func(_ context.Context, ac *AgentContext) error {
		for k, v := range vals {
			if err := ac.Set(k, v); err != nil {
				return err
			}
		}
		return nil
	}
}

func newM(t *testing.T, opts AgentExecutionOptions, agents ...ReasoningAgent) *Manager {
	t.Helper()
	m := New(Config{Options: opts})
	for _, a := range agents {
		if err := m.RegisterAgent(a); err != nil {
			t.Fatalf("register %s: %v", a.AgentID(), err)
		}
	}
	return m
}

func decode[T any](t *testing.T, ac *AgentContext, key string) T {
	t.Helper()
	var v T
	if err := ac.Decode(key, &v); err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return v
}

func input(t *testing.T, kv ...string) *AgentContext {
	t.Helper()
	ac := NewAgentContext("s1", "t1")
	for i := 0; i+1 < len(kv); i += 2 {
		if err := ac.SetInput(kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return ac
}

// The seed's "Common Violations", each with its wording and the agent id.
func TestSeedViolationMessages(t *testing.T) {
	cases := []struct {
		name  string
		vals  map[string]any
		keys  []KeySpec
		want  string
		code  string
		extra string // a key the agent tries to write outside its contract
	}{
		{name: "missing", vals: map[string]any{"reasoning.entities": map[string]any{"a": 1}},
			want: "postcondition validation failed: reasoning.intents not found", code: agenterr.CodeContractViolation},
		{name: "empty", vals: map[string]any{"reasoning.intents": []any{}, "reasoning.entities": map[string]any{"a": 1}},
			want: "postcondition validation failed: reasoning.intents is empty", code: agenterr.CodeContractViolation},
		{name: "nil", vals: map[string]any{"reasoning.intents": nil, "reasoning.entities": map[string]any{"a": 1}},
			keys: []KeySpec{{Name: "reasoning.intents", Type: TypeArray}},
			want: "postcondition validation failed: expected array, got nil", code: agenterr.CodeContractViolation},
		{name: "wrongtype", vals: map[string]any{"reasoning.intents": "x", "reasoning.entities": map[string]any{"a": 1}},
			keys: []KeySpec{{Name: "reasoning.intents", Type: TypeArray}},
			want: "postcondition validation failed: expected array, got string", code: agenterr.CodeContractViolation},
		{name: "namespace", vals: map[string]any{"reasoning.intents": []any{1}, "reasoning.entities": map[string]any{"a": 1}},
			extra: "enrichment.facts",
			want:  "namespace violation: agent wrote to unauthorized key enrichment.facts", code: agenterr.CodeNamespaceViolation},
	}
	for _, tc := range cases {
		for _, fail := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/fail=%v", tc.name, fail), func(t *testing.T) {
				var setErr error
				a := fn("intent_detection", nil, []string{"reasoning.intents", "reasoning.entities"}, func(ctx context.Context, ac *AgentContext) error {
					if tc.extra != "" {
						setErr = ac.Set(tc.extra, []any{"x"})
					}
					return setAll(tc.vals)(ctx, ac)
				})
				a.Declared = tc.keys
				later := fn("later", []string{"input.request"}, []string{"later.out"}, setAll(map[string]any{"later.out": 1}))
				m := newM(t, AgentExecutionOptions{ValidateContract: true, FailOnViolation: fail}, a, later)
				out, err := m.Execute(context.Background(), input(t, "request", "hi"))
				if out == nil {
					t.Fatalf("no context returned (err %v)", err)
				}
				vs := decode[[]event.PipelineViolation](t, out, KeyViolations)
				if len(vs) == 0 || !strings.Contains(vs[0].Message, tc.want) || vs[0].AgentID != "intent_detection" {
					t.Fatalf("violations = %+v, want message containing %q", vs, tc.want)
				}
				if tc.extra != "" {
					if setErr == nil || !strings.Contains(setErr.Error(), tc.want) || !strings.Contains(setErr.Error(), "intent_detection") {
						t.Fatalf("Set outside the contract returned %v", setErr)
					}
					if out.Has(tc.extra) {
						t.Fatalf("unauthorized write reached the context")
					}
				}
				status := out.String("metadata.status")
				if fail {
					if agenterr.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "intent_detection") {
						t.Fatalf("err = %v, want code %s with %q", err, tc.code, tc.want)
					}
					if status != PipelineStopped {
						t.Fatalf("status %q", status)
					}
				} else {
					if err != nil {
						t.Fatalf("warn mode returned %v", err)
					}
					if status != PipelineCompletedWithViolations || !out.Has("later.out") {
						t.Fatalf("warn mode did not continue: status %q", status)
					}
				}
			})
		}
	}
}

// An agent that bypasses the writer by returning a different context is
// still caught: the runtime compares what it returned with what it got.
func TestNamespaceBypassByReturnedContext(t *testing.T) {
	a := &FuncAgent{ID: "sneaky", Post: []string{"custom.output"}}
	sneaky := agentFunc{id: "sneaky", post: []string{"custom.output"}, exec: func(ctx context.Context, ac *AgentContext) (*AgentContext, error) {
		other := NewAgentContext("", "")
		_ = other.Set("custom.output", "ok")
		_ = other.Set("enrichment.facts", []string{"forged"})
		return other, nil
	}}
	_ = a
	m := newM(t, DefaultExecutionOptions(), sneaky)
	out, err := m.Execute(context.Background(), nil)
	if agenterr.CodeOf(err) != agenterr.CodeNamespaceViolation {
		t.Fatalf("err = %v", err)
	}
	if out.Has("enrichment.facts") || out.Has("custom.output") {
		t.Fatalf("writes of a violating stage reached the context: %v", out.Keys())
	}
	if !strings.Contains(err.Error(), "namespace violation: agent wrote to unauthorized key enrichment.facts") {
		t.Fatalf("err = %v", err)
	}
}

type agentFunc struct {
	id        string
	pre, post []string
	exec      func(ctx context.Context, ac *AgentContext) (*AgentContext, error)
}

func (a agentFunc) AgentID() string          { return a.id }
func (a agentFunc) Preconditions() []string  { return a.pre }
func (a agentFunc) Postconditions() []string { return a.post }
func (a agentFunc) Execute(ctx context.Context, ac *AgentContext) (*AgentContext, error) {
	return a.exec(ctx, ac)
}

// The seed's "Writing Custom Agents": custom.output is a key like any other.
func TestCustomKeyAndRuntimeNamespaces(t *testing.T) {
	first := fn("intents", nil, []string{"reasoning.intents"}, setAll(map[string]any{"reasoning.intents": []map[string]any{{"type": "q", "confidence": 0.9}}}))
	custom := fn("my_custom_agent", []string{"reasoning.intents"}, []string{"custom.output"}, func(_ context.Context, ac *AgentContext) error {
		var in []map[string]any
		if err := ac.Decode("reasoning.intents", &in); err != nil {
			return err
		}
		return ac.Set("custom.output", len(in))
	})
	intruder := fn("intruder", nil, []string{"custom.other"}, func(_ context.Context, ac *AgentContext) error {
		if err := ac.Set("input.request", "overwrite"); err == nil {
			return errors.New("input write accepted")
		}
		return ac.Set("custom.other", 1)
	})
	// warn mode, so the rejected input write does not stop the pipeline.
	m := newM(t, AgentExecutionOptions{ValidateContract: true}, first, custom, intruder)
	out, err := m.Execute(context.Background(), input(t, "request", "original"))
	if err != nil {
		t.Fatal(err)
	}
	if got := decode[int](t, out, "custom.output"); got != 1 {
		t.Fatalf("custom.output = %d", got)
	}
	if out.String("input.request") != "original" || out.Has("custom.other") {
		t.Fatal("input was overwritten, or the intruder's writes were kept")
	}
	if vs := decode[[]event.PipelineViolation](t, out, KeyViolations); len(vs) != 1 || vs[0].Key != "input.request" || vs[0].AgentID != "intruder" {
		t.Fatalf("violations %+v", vs)
	}
	// Declaring a runtime key as a postcondition is refused at registration.
	for _, k := range []string{"input.request", "audit.agent_runs", "metadata.session_id", "diagnostics.violations"} {
		err := New(Config{}).RegisterAgent(fn("x", nil, []string{k}, nil))
		if agenterr.CodeOf(err) != agenterr.CodePipelineCompile || !strings.Contains(err.Error(), k) {
			t.Errorf("postcondition %s: err = %v", k, err)
		}
	}
}

func TestRegisterRejects(t *testing.T) {
	m := New(Config{})
	if err := m.RegisterAgent(fn("a", nil, []string{"x.y"}, nil)); err != nil {
		t.Fatal(err)
	}
	bad := []ReasoningAgent{
		nil,
		fn("a", nil, []string{"x.z"}, nil),   // duplicate
		fn("", nil, []string{"x.z"}, nil),    // empty id
		fn("b c", nil, []string{"x.z"}, nil), // bad id
		fn("b", nil, []string{"nons"}, nil),  // no namespace
		fn("b", nil, []string{"x..y"}, nil),  // empty segment
		fn("b", []string{"x.1"}, nil, nil),   // segment starts with digit
		fn("b", nil, []string{"x.y", "x.y"}, nil),
		fn("b", nil, []string{"version.x"}, nil),
	}
	for i, a := range bad {
		if err := m.RegisterAgent(a); agenterr.CodeOf(err) != agenterr.CodePipelineCompile {
			t.Errorf("case %d: err = %v", i, err)
		}
	}
	for i, sc := range []StageConfig{{Timeout: -1}, {Retry: RetryPolicy{MaxRetries: 11}}, {Retry: RetryPolicy{MaxRetries: -1}}, {DependsOn: []string{"c"}}} {
		if err := m.RegisterStage(fn("c", nil, nil, nil), sc); err == nil {
			t.Errorf("stage config %d accepted", i)
		}
	}
}

func compileProblems(t *testing.T, err error) []Problem {
	t.Helper()
	var ce *CompileError
	if !errors.As(err, &ce) || agenterr.CodeOf(err) != agenterr.CodePipelineCompile {
		t.Fatalf("want a compile error, got %v", err)
	}
	return ce.Problems
}

// Compile errors come before anything runs and name the stages and keys.
func TestCompileErrors(t *testing.T) {
	var ran atomic.Int32
	run := func(context.Context, *AgentContext) error { ran.Add(1); return nil }
	t.Run("missing producer", func(t *testing.T) {
		m := newM(t, DefaultExecutionOptions(),
			fn("a", nil, []string{"reasoning.intents"}, run),
			fn("summarization", []string{"reasoning.conclusions", "enrichment.facts"}, []string{"reasoning.summary"}, run))
		_, err := m.Execute(context.Background(), nil)
		probs := compileProblems(t, err)
		if len(probs) != 2 || probs[0].Stages[0] != "summarization" || probs[0].Keys[0] != "reasoning.conclusions" ||
			!strings.Contains(probs[0].Message, "precondition reasoning.conclusions is produced by no earlier stage or input") {
			t.Fatalf("problems = %+v", probs)
		}
	})
	t.Run("input satisfies", func(t *testing.T) {
		m := newM(t, DefaultExecutionOptions(), fn("a", []string{"input.request"}, nil, run))
		if _, err := m.Compile(); err == nil {
			t.Fatal("missing input accepted")
		}
		if _, err := m.Compile("input.request"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cycle", func(t *testing.T) {
		m := newM(t, DefaultExecutionOptions(),
			fn("a", []string{"k.c"}, []string{"k.a"}, run),
			fn("b", []string{"k.a"}, []string{"k.b"}, run),
			fn("c", []string{"k.b"}, []string{"k.c"}, run),
			fn("free", nil, []string{"k.free"}, run))
		_, err := m.Execute(context.Background(), nil)
		probs := compileProblems(t, err)
		msg := probs[len(probs)-1].Message
		if !strings.Contains(msg, "stages form a cycle") || !strings.Contains(msg, "a [k.a] -> b [k.b] -> c [k.c] -> a") {
			t.Fatalf("cycle message = %q", msg)
		}
	})
	t.Run("depends_on cycle and unknown", func(t *testing.T) {
		m := New(Config{})
		_ = m.RegisterStage(fn("a", nil, nil, run), StageConfig{DependsOn: []string{"b"}})
		_ = m.RegisterStage(fn("b", nil, nil, run), StageConfig{DependsOn: []string{"a", "ghost"}})
		_, err := m.Compile()
		probs := compileProblems(t, err)
		all := fmt.Sprint(probs)
		if !strings.Contains(all, `unknown stage "ghost"`) || !strings.Contains(all, "[depends_on]") {
			t.Fatalf("problems = %v", all)
		}
	})
	t.Run("concurrent writers", func(t *testing.T) {
		m := newM(t, DefaultExecutionOptions(),
			fn("left", []string{"input.x"}, []string{"shared.out"}, run),
			fn("right", []string{"input.x"}, []string{"shared.out"}, run))
		_, err := m.Compile("input.x")
		probs := compileProblems(t, err)
		if len(probs) != 1 || strings.Join(probs[0].Stages, ",") != "left,right" || probs[0].Keys[0] != "shared.out" {
			t.Fatalf("problems = %+v", probs)
		}
		// Ordered writers are fine.
		m2 := New(Config{})
		_ = m2.RegisterAgent(fn("left", nil, []string{"shared.out"}, run))
		_ = m2.RegisterStage(fn("right", nil, []string{"shared.out"}, run), StageConfig{DependsOn: []string{"left"}})
		if _, err := m2.Compile(); err != nil {
			t.Fatal(err)
		}
		// So are concurrent writers of a reducer key.
		m3 := New(Config{Keys: []KeySpec{{Name: "shared.out", Type: TypeArray, Reducer: ReduceAppend}}})
		_ = m3.RegisterAgent(fn("left", nil, []string{"shared.out"}, run))
		_ = m3.RegisterAgent(fn("right", nil, []string{"shared.out"}, run))
		if _, err := m3.Compile(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("conflicting declarations", func(t *testing.T) {
		a := fn("a", nil, []string{"k.x"}, run)
		a.Declared = []KeySpec{{Name: "k.x", Type: TypeArray}}
		b := fn("b", nil, []string{"k.y"}, run)
		b.Declared = []KeySpec{{Name: "k.x", Type: TypeString}}
		m := newM(t, DefaultExecutionOptions(), a, b)
		probs := compileProblems(t, func() error { _, err := m.Compile(); return err }())
		if !strings.Contains(probs[0].Message, "declared differently by stage a and stage b") {
			t.Fatalf("%+v", probs)
		}
	})
	if ran.Load() != 0 {
		t.Fatalf("%d stages ran despite compile errors", ran.Load())
	}
}

// Independent stages run at the same time; a reducer key combines their
// writes in stage order whatever the completion order.
func TestParallelStagesAndReducer(t *testing.T) {
	const n = 8
	var inFlight, peak atomic.Int32
	gate := make(chan struct{})
	m := New(Config{Options: DefaultExecutionOptions(), MaxParallel: n,
		Keys: []KeySpec{{Name: "retrieval.artifacts", Type: TypeArray, Reducer: ReduceAppend}}})
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("fetch%d", i)
		err := m.RegisterAgent(fn(id, []string{"input.request"}, []string{"retrieval.artifacts", "out." + id}, func(ctx context.Context, ac *AgentContext) error {
			cur := inFlight.Add(1)
			for {
				p := peak.Load()
				if cur <= p || peak.CompareAndSwap(p, cur) {
					break
				}
			}
			if cur == n {
				close(gate)
			}
			select {
			case <-gate:
			case <-time.After(2 * time.Second):
			}
			// Finish in reverse order.
			time.Sleep(time.Duration(n-i) * time.Millisecond)
			inFlight.Add(-1)
			if err := ac.Set("out."+id, ac.String("input.request")+id); err != nil {
				return err
			}
			return ac.Set("retrieval.artifacts", []string{id})
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := m.RegisterAgent(fn("merge", []string{"retrieval.artifacts"}, []string{"enrichment.facts"}, func(_ context.Context, ac *AgentContext) error {
		v, _ := ac.Get("retrieval.artifacts")
		return ac.Set("enrichment.facts", v)
	})); err != nil {
		t.Fatal(err)
	}
	out, err := m.Execute(context.Background(), input(t, "request", "r-"))
	if err != nil {
		t.Fatal(err)
	}
	if peak.Load() != n {
		t.Fatalf("peak parallelism %d, want %d", peak.Load(), n)
	}
	got := decode[[]string](t, out, "enrichment.facts")
	want := []string{"fetch0", "fetch1", "fetch2", "fetch3", "fetch4", "fetch5", "fetch6", "fetch7"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reduced = %v", got)
	}
	perf := decode[Performance](t, out, KeyPerformance)
	if perf.MaxParallel != n || len(perf.Stages) != n+1 || len(perf.Plan) != 2 {
		t.Fatalf("performance = %+v", perf)
	}
}

func TestTimeoutRetryPanic(t *testing.T) {
	opts := AgentExecutionOptions{ValidateContract: true, FailOnViolation: true}
	t.Run("timeout ignored ctx", func(t *testing.T) {
		m := New(Config{Options: opts})
		_ = m.RegisterStage(fn("slow", nil, []string{"k.v"}, func(ctx context.Context, ac *AgentContext) error {
			time.Sleep(300 * time.Millisecond) // ignores ctx
			return ac.Set("k.v", 1)
		}), StageConfig{Timeout: 20 * time.Millisecond})
		out, err := m.Execute(context.Background(), nil)
		if !errors.Is(err, agenterr.ErrStageTimeout) || !strings.Contains(err.Error(), "slow") {
			t.Fatalf("err = %v", err)
		}
		if out.Has("k.v") {
			t.Fatal("write of a timed-out attempt reached the context")
		}
	})
	t.Run("retry then succeed", func(t *testing.T) {
		var calls atomic.Int32
		m := New(Config{Options: opts})
		_ = m.RegisterStage(fn("flaky", nil, []string{"k.v"}, func(ctx context.Context, ac *AgentContext) error {
			if calls.Add(1) < 3 {
				return errors.New("transient")
			}
			return ac.Set("k.v", 1)
		}), StageConfig{Retry: RetryPolicy{MaxRetries: 3, Backoff: time.Millisecond}})
		out, err := m.Execute(context.Background(), nil)
		if err != nil || calls.Load() != 3 {
			t.Fatalf("err %v after %d calls", err, calls.Load())
		}
		runs := decode[[]AgentRun](t, out, KeyAgentRuns)
		errs := decode[[]StageError](t, out, KeyErrors)
		if len(runs) != 1 || runs[0].Attempts != 3 || runs[0].Status != StatusSucceeded || len(errs) != 2 || errs[1].Final {
			t.Fatalf("runs %+v errs %+v", runs, errs)
		}
	})
	t.Run("retries bounded", func(t *testing.T) {
		var calls atomic.Int32
		m := New(Config{Options: opts})
		_ = m.RegisterStage(fn("broken", nil, []string{"k.v"}, func(context.Context, *AgentContext) error {
			calls.Add(1)
			return errors.New("always")
		}), StageConfig{Retry: RetryPolicy{MaxRetries: 2, Backoff: time.Millisecond}})
		_, err := m.Execute(context.Background(), nil)
		if !errors.Is(err, agenterr.ErrStageFailed) || calls.Load() != 3 {
			t.Fatalf("err %v, calls %d", err, calls.Load())
		}
	})
	t.Run("panic", func(t *testing.T) {
		m := newM(t, AgentExecutionOptions{ValidateContract: true},
			fn("boom", nil, []string{"k.v"}, func(context.Context, *AgentContext) error { panic("kaboom") }),
			fn("fine", nil, []string{"k.w"}, setAll(map[string]any{"k.w": true})))
		out, err := m.Execute(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		runs := decode[[]AgentRun](t, out, KeyAgentRuns)
		if runs[0].Status != StatusFailed || runs[0].Code != agenterr.CodeStagePanic || !strings.Contains(runs[0].Error, "kaboom") || runs[1].Status != StatusSucceeded {
			t.Fatalf("runs = %+v", runs)
		}
	})
	t.Run("nil result", func(t *testing.T) {
		m := newM(t, opts, agentFunc{id: "nil", post: []string{"k.v"}, exec: func(context.Context, *AgentContext) (*AgentContext, error) { return nil, nil }})
		_, err := m.Execute(context.Background(), nil)
		if !errors.Is(err, agenterr.ErrStageFailed) || !strings.Contains(err.Error(), "nil context") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		m := newM(t, AgentExecutionOptions{}, fn("wait", nil, []string{"k.v"}, func(ctx context.Context, _ *AgentContext) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}), fn("after", []string{"k.v"}, []string{"k.w"}, setAll(map[string]any{"k.w": 1})))
		out, err := m.Execute(ctx, nil)
		if !errors.Is(err, agenterr.ErrCanceled) || out.Has("k.w") {
			t.Fatalf("err = %v", err)
		}
	})
}

// Warn mode: a failed stage's dependents are skipped with a precondition
// violation; independent stages still run.
func TestWarnModeSkipsDependents(t *testing.T) {
	m := newM(t, AgentExecutionOptions{ValidateContract: true},
		fn("a", nil, []string{"k.a"}, func(context.Context, *AgentContext) error { return errors.New("no data") }),
		fn("b", []string{"k.a"}, []string{"k.b"}, setAll(map[string]any{"k.b": 1})),
		fn("c", nil, []string{"k.c"}, setAll(map[string]any{"k.c": 1})))
	out, err := m.Execute(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	runs := decode[[]AgentRun](t, out, KeyAgentRuns)
	st := map[string]string{}
	for _, r := range runs {
		st[r.AgentID] = r.Status
	}
	if st["a"] != StatusFailed || st["b"] != StatusSkipped || st["c"] != StatusSucceeded {
		t.Fatalf("statuses %v", st)
	}
	vs := decode[[]event.PipelineViolation](t, out, KeyViolations)
	if len(vs) != 1 || vs[0].Message != "precondition validation failed: k.a not found" || vs[0].AgentID != "b" {
		t.Fatalf("violations %+v", vs)
	}
}

// The audit is computed by the runtime: one record per stage, and every key
// written with its size and hash.
func TestAuditRecordsActualWrites(t *testing.T) {
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := New(Config{Options: DefaultExecutionOptions(), Now: func() time.Time { return clock }})
	_ = m.RegisterAgent(fn("w", nil, []string{"k.a", "k.b"}, setAll(map[string]any{"k.a": []int{1, 2}, "k.b": "x"})))
	out, err := m.Execute(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := decode[[]WriteRecord](t, out, KeyWrites)
	if len(ws) != 2 || ws[0].Key != "k.a" || ws[0].Size != len("[1,2]") || !ws[0].Time.Equal(clock) || ws[0].AgentID != "w" {
		t.Fatalf("writes %+v", ws)
	}
	sum := sha256.Sum256([]byte("[1,2]"))
	if ws[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("hash %s", ws[0].SHA256)
	}
	runs := decode[[]AgentRun](t, out, KeyAgentRuns)
	if len(runs) != 1 || strings.Join(runs[0].KeysWritten, ",") != "k.a,k.b" {
		t.Fatalf("runs %+v", runs)
	}
	// The whole context renders by namespace.
	b, _ := json.Marshal(out)
	var doc map[string]json.RawMessage
	_ = json.Unmarshal(b, &doc)
	for _, ns := range []string{"version", "k", "audit", "diagnostics", "metadata"} {
		if _, ok := doc[ns]; !ok {
			t.Errorf("namespace %s missing from %s", ns, b)
		}
	}
}

// Stages read snapshots: changing a decoded value changes nothing for
// others, and keys a stage did not declare are not visible to it.
func TestSnapshotIsolation(t *testing.T) {
	m := newM(t, DefaultExecutionOptions(),
		fn("p", nil, []string{"k.list", "k.hidden"}, setAll(map[string]any{"k.list": []int{1}, "k.hidden": "h"})),
		fn("mutator", []string{"k.list"}, []string{"k.m"}, func(_ context.Context, ac *AgentContext) error {
			v, _ := ac.Get("k.list")
			v.([]any)[0] = 99.0
			if ac.Has("k.hidden") {
				return errors.New("undeclared key visible")
			}
			return ac.Set("k.m", 1)
		}),
		fn("reader", []string{"k.list", "k.m"}, []string{"k.r"}, func(_ context.Context, ac *AgentContext) error {
			return ac.Set("k.r", ac.String("k.list")+func() string { b, _ := ac.Raw("k.list"); return string(b) }())
		}))
	out, err := m.Execute(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decode[string](t, out, "k.r"); got != "[1]" {
		t.Fatalf("reader saw %q", got)
	}
	warns := decode[[]string](t, out, KeyWarnings)
	if len(warns) != 1 || !strings.Contains(warns[0], "mutator read k.hidden") {
		t.Fatalf("warnings %v", warns)
	}
}

func TestValidateContractOff(t *testing.T) {
	m := newM(t, AgentExecutionOptions{FailOnViolation: true},
		fn("a", nil, []string{"k.a"}, func(_ context.Context, ac *AgentContext) error { return nil }),
		fn("b", []string{"k.a"}, []string{"k.b"}, func(_ context.Context, ac *AgentContext) error { return ac.Set("k.x", 1) }))
	out, err := m.Execute(context.Background(), nil)
	// Contracts unchecked, but isolation still enforced.
	if agenterr.CodeOf(err) != agenterr.CodeNamespaceViolation || out.Has("k.x") {
		t.Fatalf("err = %v", err)
	}
}

func TestKeySchema(t *testing.T) {
	a := fn("a", nil, []string{"k.n"}, setAll(map[string]any{"k.n": 5}))
	a.Declared = []KeySpec{{Name: "k.n", Type: TypeNumber, Schema: json.RawMessage(`{"type":"number","maximum":3}`)}}
	m := newM(t, DefaultExecutionOptions(), a)
	_, err := m.Execute(context.Background(), nil)
	if agenterr.CodeOf(err) != agenterr.CodeContractViolation || !strings.Contains(err.Error(), "k.n does not match its schema") {
		t.Fatalf("err = %v", err)
	}
}
