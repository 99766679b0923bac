package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/tool"
)

// fakeTool is a tool whose Run does what the test needs.
type fakeTool struct {
	name string
	kind tool.Kind
	run  func(ctx context.Context, in json.RawMessage) (tool.Result, error)
}

func (f fakeTool) Spec() tool.Spec {
	return tool.Spec{Name: f.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (f fakeTool) Kind() tool.Kind { return f.kind }
func (f fakeTool) Run(ctx context.Context, in json.RawMessage) (tool.Result, error) {
	return f.run(ctx, in)
}

func TestChainOrder(t *testing.T) {
	var trail []string
	mark := func(name string) tool.Middleware {
		return func(next tool.Handler) tool.Handler {
			return func(ctx context.Context, c tool.Call) tool.Outcome {
				trail = append(trail, "in:"+name)
				out := next(ctx, c)
				trail = append(trail, "out:"+name)
				return out
			}
		}
	}
	h := tool.Chain(func(context.Context, tool.Call) tool.Outcome {
		trail = append(trail, "handler")
		return tool.Outcome{}
	}, mark("a"), nil, mark("b"))
	h(context.Background(), tool.Call{})
	if got := strings.Join(trail, " "); got != "in:a in:b handler out:b out:a" {
		t.Fatal(got)
	}
}

func TestInvoke(t *testing.T) {
	ctx := context.Background()
	ok := fakeTool{name: "ok", run: func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: "fine"}, nil
	}}
	failing := fakeTool{name: "failing", run: func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: "partial"}, errors.New("disk on fire")
	}}
	panicking := fakeTool{name: "panicking", run: func(context.Context, json.RawMessage) (tool.Result, error) {
		panic("boom")
	}}
	for _, tc := range []struct {
		call    tool.Call
		want    string
		isError bool
	}{
		{tool.Call{Name: "ok", Tool: ok}, "fine", false},
		{tool.Call{Name: "failing", Tool: failing}, "tool failing failed: disk on fire", true},
		{tool.Call{Name: "panicking", Tool: panicking}, "tool panicking failed: internal error: boom", true},
		{tool.Call{Name: "ghost"}, `unknown tool "ghost"`, true},
	} {
		out := tool.Invoke(ctx, tc.call)
		if out.Content != tc.want || out.IsError != tc.isError || out.Denied {
			t.Errorf("%s: %+v", tc.call.Name, out)
		}
	}
}

func TestEnforce(t *testing.T) {
	ran := false
	write := fakeTool{name: "Write", kind: tool.KindEdit, run: func(context.Context, json.RawMessage) (tool.Result, error) {
		ran = true
		return tool.Result{Content: "written"}, nil
	}}
	h := tool.Chain(tool.Invoke, tool.Enforce(tool.Policy{Mode: tool.ModePlan}))
	out := h(context.Background(), tool.Call{Name: "Write", Input: json.RawMessage(`{}`), Tool: write})
	if ran || !out.Denied || !out.IsError || !strings.HasPrefix(out.Content, "permission denied: ") {
		t.Fatalf("ran %v, %+v", ran, out)
	}
	h = tool.Chain(tool.Invoke, tool.Enforce(tool.Policy{Mode: tool.ModeAcceptEdits}))
	if out := h(context.Background(), tool.Call{Name: "Write", Input: json.RawMessage(`{}`), Tool: write}); !ran || out.Content != "written" {
		t.Fatalf("ran %v, %+v", ran, out)
	}
}

func TestTruncateOutput(t *testing.T) {
	if got := tool.TruncateOutput("short", 10); got != "short" {
		t.Fatal(got)
	}
	s := strings.Repeat("é", 10) // 2 bytes each: a cut at 5 falls inside a rune
	got := tool.TruncateOutput(s, 5)
	if !utf8.ValidString(got) || !strings.HasPrefix(got, "éé\n") || !strings.HasSuffix(got, "[output truncated: 20 bytes total]") {
		t.Fatalf("%q", got)
	}
	big := fakeTool{name: "big", run: func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: strings.Repeat("x", 100)}, nil
	}}
	out := tool.Chain(tool.Invoke, tool.Truncate(10))(context.Background(), tool.Call{Name: "big", Tool: big})
	if !strings.HasPrefix(out.Content, "xxxxxxxxxx\n[output truncated: 100 bytes total]") {
		t.Fatalf("%q", out.Content)
	}
}
