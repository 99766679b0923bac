package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/tool"
)

// keyInput is the input of the test tool that reads a variable.
type keyInput struct {
	Name string `json:"name"`
}

// TestCustomToolResultsAreRedacted: a Go tool from Config.Tools that hands
// back a secret variable's value (or fails with it, or panics with it)
// does not carry the value to the model, the journal or the result: its
// results pass the redaction of the built-in, MCP and skill tools.
func TestCustomToolResultsAreRedacted(t *testing.T) {
	const key = "sk-custom-tool-0123456789abcdef"
	t.Setenv("CUSTOM_TOOL_API_KEY", key)
	getenv := tool.Func("getenv", "Read a variable.", func(_ context.Context, in keyInput) (string, error) {
		return "value: " + os.Getenv(in.Name), nil
	}).WithKind(tool.KindRead)
	failing := tool.Func("fail", "Fail with a variable.", func(_ context.Context, in keyInput) (string, error) {
		return "", &probeError{os.Getenv(in.Name)}
	}).WithKind(tool.KindRead)
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE"}`, "", `turns:
  - tool_calls: [{name: getenv, input: {name: CUSTOM_TOOL_API_KEY}}, {name: fail, input: {name: CUSTOM_TOOL_API_KEY}}]
  - text: DONE
`)
	agentJSON := filepath.Join(dir, agentdir.AgentFile)
	b, err := os.ReadFile(agentJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agentJSON, []byte(strings.Replace(string(b), `["Write"]`, `["getenv", "fail"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir, goValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.Tools = t.TempDir(), []tool.Tool{getenv, failing}
	res := runToEnd(t, cfg.Agent, cfg)
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	b, err = os.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), key) {
		t.Errorf("the journal holds the key")
	}
	if !strings.Contains(string(b), "value: "+proc.Redacted) || !strings.Contains(string(b), "probe "+proc.Redacted+" unreachable") {
		t.Errorf("the journal lacks the redacted result or error:\n%s", b)
	}
}

// TestStreamedModelOutputIsRedacted: an embedder's consumer of the model
// output (a Config.Events consumer that wants it, writing a log) gets the
// model's text and tool calls with secret values replaced, as the
// journal and the CLI have them.
func TestStreamedModelOutputIsRedacted(t *testing.T) {
	const key = "sk-streamed-0123456789abcdef"
	t.Setenv("STREAMED_API_KEY", key)
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE"}`, "", `turns:
  - text: "the key is `+key+`"
    tool_calls: [{name: Write, input: {file_path: out.txt, content: "`+key+`"}}]
  - text: "DONE `+key+`"
`)
	rec := &recorder{output: true}
	cfg, err := Load(dir, goValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.Events = t.TempDir(), []event.Consumer{rec}
	if res := runToEnd(t, cfg.Agent, cfg); !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	// A sink in the run's context, with no consumer of the model output
	// or next to one, gets the same.
	for _, events := range [][]event.Consumer{nil, {&recorder{output: true}}} {
		sink := &fakellm.SinkRecorder{}
		cfg.WorkDir, cfg.Events = t.TempDir(), events
		a, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := llm.WithStreamSink(context.Background(), sink)
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if res := a.Run(ctx); !res.Success {
			t.Fatalf("%+v %+v", res, res.Error)
		}
		a.Stop()
		if got, want := strings.Join(sink.Outline(), " | "), "text:the key is "+proc.Redacted+" | start:Write | end:Write | text:DONE "+proc.Redacted; got != want {
			t.Errorf("with %d consumers, the context's sink got %q, want %q", len(events), got, want)
		}
	}
	var texts, all strings.Builder
	for _, e := range rec.events {
		if !event.IsModelOutput(e.Kind) {
			continue
		}
		if e.Kind == event.KindTextDelta {
			texts.WriteString(e.Payload.(event.TextDeltaEvent).Text)
		}
		b, _ := json.Marshal(e.Payload)
		all.Write(b)
	}
	if strings.Contains(all.String(), key) {
		t.Errorf("the model output events hold the key: %s", all.String())
	}
	if want := "the key is " + proc.Redacted + "DONE " + proc.Redacted; texts.String() != want {
		t.Errorf("streamed text %q, want %q", texts.String(), want)
	}
}
