package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/verify"
)

// closeCounter is a bridge an embedder opened; the agent must use it and
// close it on Stop.
type closeCounter struct {
	llm.Bridge
	queries, closes int
}

func (b *closeCounter) Query(ctx context.Context, prompt string, opts llm.QueryOptions) (*event.QueryResult, error) {
	b.queries++
	return b.Bridge.Query(ctx, prompt, opts)
}

func (b *closeCounter) Close() error { b.closes++; return b.Bridge.Close() }

// loadScripted loads the agent in dir with in's values and a temporary
// work dir, and opens the agent's script model (script.yaml) for a test
// to wrap as Config.Bridge.
func loadScripted(t *testing.T, dir string, in Config) (Config, llm.Bridge) {
	t.Helper()
	cfg, err := Load(dir, in)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = t.TempDir()
	inner, err := llm.Open(context.Background(), "script:script.yaml", llm.Config{AgentDir: dir, WorkDir: cfg.WorkDir})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, inner
}

func TestConfigBridgeIsTheRunsModel(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", honestScript)
	cfg, inner := loadScripted(t, dir, goValues(nil))
	b := &closeCounter{Bridge: inner}
	cfg.Bridge = b
	// Without tools the bridge cannot write out.txt: the claim is refuted.
	res := runToEnd(t, cfg.Agent, cfg)
	if res.Success || b.queries == 0 || b.closes != 1 {
		t.Fatalf("result %+v, %d queries, %d closes", res, b.queries, b.closes)
	}

	cfg.Tools = []tool.Tool{namedTool("mine")}
	_, err := New(context.Background(), cfg)
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeConfigurationValidation || !strings.Contains(e.Message, "Config.Bridge") {
		t.Fatalf("Bridge with Tools: %v", err)
	}
}

type namedTool string

func (n namedTool) Spec() tool.Spec {
	return tool.Spec{Name: string(n), Description: "test tool", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (namedTool) Kind() tool.Kind { return tool.KindRead }
func (namedTool) Run(context.Context, json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: "ok"}, nil
}

func TestConfigToolsMustNotShadowBuiltins(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE"}`, "", liarScript)
	cfg, err := Load(dir, goValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.Tools = t.TempDir(), []tool.Tool{namedTool("Write")}
	_, err = New(context.Background(), cfg)
	if e := agenterr.From(err); e == nil || !strings.Contains(e.Message, `"Write" already exists`) {
		t.Fatalf("shadowing Write: %v", err)
	}
}

// brokenValidator cannot run at all.
type brokenValidator struct{}

type probeError struct{ probe string }

func (e *probeError) Error() string { return "probe " + e.probe + " unreachable" }

func (brokenValidator) Validate(context.Context, verify.CustomRequest) (verify.CustomResult, error) {
	return verify.CustomResult{}, &probeError{"db"}
}

// TestResultErrorKeepsItsChain: the run's error unwraps to what caused it,
// so errors.As finds a Go validator's own error type, and errors.Is the
// capstan code.
func TestResultErrorKeepsItsChain(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["counted"]}`, "", liarScript)
	cfg, err := Load(dir, Config{Validators: map[string]verify.CustomValidator{"counting": brokenValidator{}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = t.TempDir()
	res := runToEnd(t, cfg.Agent, cfg)
	var pe *probeError
	if !errors.As(res.Err(), &pe) || pe.probe != "db" || !errors.Is(res.Err(), agenterr.ErrValidator) {
		t.Fatalf("error %v (%T)", res.Err(), res.Err())
	}
	// After a JSON round trip the code still matches.
	var back event.RunResult
	b, _ := json.Marshal(res)
	if err := json.Unmarshal(b, &back); err != nil || !errors.Is(back.Err(), agenterr.ErrValidator) {
		t.Fatalf("round trip: %v %v", back.Err(), err)
	}
}
