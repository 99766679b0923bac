package claudecode_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/claudecode"
)

// TestStreamPartialMessages: with a sink the driver asks the CLI for
// partial messages and passes the stream_event text deltas on, not the
// assistant frames' copy of the same text; a delta run cut by an API retry
// is marked with TextDiscarded; a sub-agent's text is not streamed; tool
// calls are bracketed by their tool_use and tool_result frames.
func TestStreamPartialMessages(t *testing.T) {
	b, logPath := newBridge(t, "stream", nil, nil)
	rec := &fakellm.SinkRecorder{}
	res, err := b.Query(llm.WithStreamSink(context.Background(), rec), "run the tests", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(readLog(t, logPath).Args, "--include-partial-messages") {
		t.Error("no --include-partial-messages with a sink")
	}
	want := []string{"text:Let me look.", "start:Bash", "end:Bash!error", "text:Tests fa", "discard", "text:Tests fail."}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
	if got := rec.Texts(); len(got) != 5 {
		t.Errorf("deltas %q, want the CLI's fragments", got)
	}
	if last := res.Responses[len(res.Responses)-1]; last != "Tests fail." {
		t.Errorf("responses %q", res.Responses)
	}
}

// TestStreamWithoutSinkAsksForNoPartialMessages: partial messages cost
// output volume, so the flag is passed only when a sink wants them.
func TestStreamWithoutSinkAsksForNoPartialMessages(t *testing.T) {
	b, logPath := newBridge(t, "stream", nil, nil)
	if _, err := b.Query(context.Background(), "run the tests", llm.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(readLog(t, logPath).Args, "--include-partial-messages") {
		t.Error("--include-partial-messages without a sink")
	}
}

// callsLog makes the fake CLI append each run's argv to a file and returns
// a function reading them back.
func callsLog(t *testing.T) (func(*claudecode.Config), func() [][]string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "calls.jsonl")
	mut := func(c *claudecode.Config) { c.Env = append(c.Env, "FAKE_CLAUDE_CALLS="+p) }
	read := func() [][]string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		var calls [][]string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var args []string
			if err := json.Unmarshal([]byte(line), &args); err != nil {
				t.Fatal(err)
			}
			calls = append(calls, args)
		}
		return calls
	}
	return mut, read
}

func partialFlags(calls [][]string) []bool {
	var out []bool
	for _, c := range calls {
		out = append(out, slices.Contains(c, "--include-partial-messages"))
	}
	return out
}

// TestStreamOldCLIWithoutPartialMessages: a CLI too old to know
// --include-partial-messages rejects it before printing anything; the
// driver runs the query again without it, streams each assistant frame's
// text whole, and does not ask that CLI for partial messages again.
func TestStreamOldCLIWithoutPartialMessages(t *testing.T) {
	mut, calls := callsLog(t)
	ev := &events{}
	b, _ := newBridge(t, "old-cli", ev, mut)
	rec := &fakellm.SinkRecorder{}
	ctx := llm.WithStreamSink(context.Background(), rec)
	res, err := b.Query(ctx, "run the tests", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"text:Let me look.", "start:Bash", "end:Bash!error", "text:Tests fail."}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
	if got := rec.Texts(); !reflect.DeepEqual(got, []string{"Let me look.", "Tests fail."}) {
		t.Errorf("texts %q, want each assistant frame's text whole", got)
	}
	if last := res.Responses[len(res.Responses)-1]; last != "Tests fail." {
		t.Errorf("responses %q", res.Responses)
	}
	if got := partialFlags(calls()); !reflect.DeepEqual(got, []bool{true, false}) {
		t.Fatalf("runs with --include-partial-messages: %v, want [true false]", got)
	}
	warned := 0
	for _, e := range ev.all() {
		if strings.HasPrefix(e, journal.Warning+" ") && strings.Contains(e, "--include-partial-messages") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("%d warnings about the option, want 1: %q", warned, ev.all())
	}

	// The bridge remembers: the next query runs once, without the flag.
	rec2 := &fakellm.SinkRecorder{}
	if _, err := b.Query(llm.WithStreamSink(context.Background(), rec2), "again", llm.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := partialFlags(calls()); !reflect.DeepEqual(got, []bool{true, false, false}) {
		t.Fatalf("runs with --include-partial-messages: %v, want [true false false]", got)
	}
	if got := rec2.Outline(); !reflect.DeepEqual(got, want) {
		t.Errorf("second query: sink saw %q, want %q", got, want)
	}
}

// TestStreamOldCLIConcurrentQueries: queries sharing a bridge may find out
// about the old CLI at the same time; each still succeeds (run with -race).
func TestStreamOldCLIConcurrentQueries(t *testing.T) {
	mut, calls := callsLog(t)
	b, _ := newBridge(t, "old-cli", nil, mut)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Query(llm.WithStreamSink(context.Background(), &fakellm.SinkRecorder{}), "run the tests", llm.QueryOptions{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("query %d: %v", i, err)
		}
	}
	if _, err := b.Query(llm.WithStreamSink(context.Background(), &fakellm.SinkRecorder{}), "later", llm.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	all := partialFlags(calls())
	if all[len(all)-1] {
		t.Errorf("a query after the concurrent ones still asked for partial messages: %v", all)
	}
}

// TestStreamOtherFailuresNotRetried: only the CLI's rejection of
// --include-partial-messages itself, before any frame, makes the driver
// drop the option; other failures are reported after one run and later
// queries still ask for partial messages.
func TestStreamOtherFailuresNotRetried(t *testing.T) {
	for _, scenario := range []string{"other-unknown-option", "unknown-option-after-frames", "crash"} {
		t.Run(scenario, func(t *testing.T) {
			mut, calls := callsLog(t)
			b, _ := newBridge(t, scenario, nil, mut)
			ctx := llm.WithStreamSink(context.Background(), &fakellm.SinkRecorder{})
			_, err := b.Query(ctx, "hi", llm.QueryOptions{})
			if agenterr.CodeOf(err) != agenterr.CodeSdkConnection {
				t.Fatalf("err = %v, want %s", err, agenterr.CodeSdkConnection)
			}
			if got := partialFlags(calls()); !reflect.DeepEqual(got, []bool{true}) {
				t.Fatalf("runs with --include-partial-messages: %v, want [true]", got)
			}
			_, _ = b.Query(ctx, "hi", llm.QueryOptions{})
			if got := partialFlags(calls()); !reflect.DeepEqual(got, []bool{true, true}) {
				t.Errorf("runs with --include-partial-messages: %v, want [true true]", got)
			}
		})
	}
}

// TestStreamSyntheticAssistantFrameWhole: a CLI that does stream partial
// messages still prints some assistant frames without any stream_event
// deltas: the messages it makes up itself, like the "API Error: ..." text
// of a failed API call. Their text reaches the sink whole.
func TestStreamSyntheticAssistantFrameWhole(t *testing.T) {
	b, logPath := newBridge(t, "rate-limit", nil, nil)
	rec := &fakellm.SinkRecorder{}
	_, err := b.Query(llm.WithStreamSink(context.Background(), rec), "hi", llm.QueryOptions{})
	if agenterr.CodeOf(err) != agenterr.CodeSdkRateLimit {
		t.Fatalf("err = %v", err)
	}
	if !slices.Contains(readLog(t, logPath).Args, "--include-partial-messages") {
		t.Error("no --include-partial-messages with a sink")
	}
	if got, want := rec.Outline(), []string{"text:API Error: 429 rate limited"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
}
