package agent

import (
	"context"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
)

// The agents of one definition share its prompt resolver (and so its
// parsed prompts); another definition has its own.
func TestAgentsOfOneDefinitionShareItsPrompts(t *testing.T) {
	dir := basicAgent(t, twoIterationScript, "")
	def, other := load(t, dir), load(t, dir)
	ctx := context.Background()
	build := func() *Agent {
		t.Helper()
		a, err := Build(ctx, def, BuildOptions{WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Stop() })
		return a
	}
	a1, a2 := build(), build()
	if a1.prompts != a2.prompts {
		t.Error("two agents of one definition have their own prompt resolvers")
	}
	if sharedFor(other).prompts == a1.prompts {
		t.Error("two definitions share a prompt resolver")
	}
	if res := runToEnd(t, def, BuildOptions{WorkDir: t.TempDir()}); !res.Success {
		t.Fatalf("run on the shared resolver failed: %+v", res)
	}
}

// The shared state never keeps a definition alive: its entry goes when
// the definition is collected.
func TestSharedStateLetsTheDefinitionGo(t *testing.T) {
	dir := basicAgent(t, twoIterationScript, "")
	// Other tests load and drop definitions at the same time, so the
	// test follows its own entry, not the size of the map.
	var key weak.Pointer[agentdir.Agent]
	func() {
		def := load(t, dir)
		key = weak.Make(def)
		_ = sharedFor(def)
		if _, ok := definitions.Load(key); !ok {
			t.Fatal("sharedFor kept no entry for the definition")
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := definitions.Load(key); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the entry of a collected definition is still there")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// Agents of one definition run at the same time on what they share (run
// with -race).
func TestAgentsOfOneDefinitionRunConcurrently(t *testing.T) {
	def := load(t, basicAgent(t, twoIterationScript, ""))
	ctx := context.Background()
	const n = 4
	results := make([]*event.RunResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := Build(ctx, def, BuildOptions{WorkDir: t.TempDir()})
			if err == nil {
				err = a.Start(ctx)
			}
			if err != nil {
				errs[i] = err
				return
			}
			a.Run(ctx)
			results[i] = a.Stop()
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("agent %d: %v", i, errs[i])
		}
		if !results[i].Success {
			t.Errorf("agent %d: %+v", i, results[i])
		}
	}
	assertSharedUnchanged(t, def)
}

// Agents of one definition given the same parameters share one map of
// prompt variables; other values get their own, and the shared one is
// not changed by them.
func TestAgentsGivenTheSameParametersShareTheirVariables(t *testing.T) {
	def := load(t, filepath.Join("..", "examples", "hello"))
	ctx := context.Background()
	build := func(params map[string]string) *Agent {
		t.Helper()
		a, err := Build(ctx, def, BuildOptions{WorkDir: t.TempDir(), Params: params})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Stop() })
		return a
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a1, a2 := build(nil), build(nil)
	if !same(a1.vars, a2.vars) || a1.vars["name"] != "world" {
		t.Fatalf("two agents with the default parameters: %v and %v, shared %v", a1.vars, a2.vars, same(a1.vars, a2.vars))
	}
	a3 := build(map[string]string{"name": "moon"})
	if same(a3.vars, a1.vars) || a3.vars["name"] != "moon" || a1.vars["name"] != "world" {
		t.Fatalf("an agent with its own parameters: %v (the first agent's %v)", a3.vars, a1.vars)
	}
}
