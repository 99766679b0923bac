package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
)

// TestToolLoopCanceledMidStreamLeaksNothing: a query of the shared tool
// loop canceled while the provider waits on a stalled stream returns
// CANCELED and leaves no goroutine behind (the stream, its timers and the
// retry wait all end with it).
func TestToolLoopCanceledMidStreamLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{
		{ToolCalls: []fakellm.ToolCall{{Name: "Echo", Input: json.RawMessage(`{}`)}}},
		{Text: "never finished", Fault: &fakellm.Fault{StallAfter: 2}},
	}})
	m := newModel(t, srv, nil, nil)
	echo := tool.Func("Echo", "Echoes.", func(context.Context, struct{}) (string, error) { return "echo", nil })
	bridge := llm.NewToolLoop(m, llm.Config{Tools: []tool.Tool{echo}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := bridge.Query(ctx, "go", llm.QueryOptions{PermissionMode: tool.ModeBypassPermissions})
	if !errors.Is(err, agenterr.ErrCanceled) || res == nil || len(res.ToolUses) != 1 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	srv.Close()
	srv.Client().CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
