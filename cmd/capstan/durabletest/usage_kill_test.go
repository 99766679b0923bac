package durabletest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
)

// TestUsageOfAResponseReadBeforeAKillCounts: the model API (a fake on
// loopback) finishes a response whose Bash call the run is killed in
// (SIGKILL, the call's command with it). The response's usage was read
// from the wire before its tool call ran, so it is in the journal: the
// resumed run's usage is what the server billed in all, each response
// once, and the server answered each model turn once.
func TestUsageOfAResponseReadBeforeAKillCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a run: skipped with -short")
	}
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if r.ToolResults == 0 {
			return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 100},
				ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"echo start >> starts.txt; sleep 60"}`)}}}
		}
		return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 200, OutputTokens: 20}, Text: "told; ALL_DONE"}
	}})
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "billed", "description": "one Bash call the run is killed in",
  "runner": {"model": "anthropic:claude-sonnet-4-5", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "billed", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Run the command.",
	})
	wd := t.TempDir()
	run := killedRun(t, dir, wd, srv.URL, func(done <-chan error) { waitForLine(t, filepath.Join(wd, "starts.txt"), done) })
	res := resumeToEnd(t, run.ID)
	answered := map[int]int{}
	for _, r := range srv.Requests() {
		if r.Status == 200 {
			answered[r.Request.ToolResults]++
		}
	}
	if answered[0] != 1 || answered[1] != 1 || len(answered) != 2 {
		t.Fatalf("model turns answered (by tool results in the request): %v, want 0 and 1 once each", answered)
	}
	if got := res.Usage; got.Input() != 1200 || got.OutputTokens != 120 {
		t.Errorf("resumed run's usage %+v (input %d), want what the server billed: 1200 input, 120 output tokens", got, got.Input())
	}
	if n := clitest.CountLines(t, filepath.Join(wd, "starts.txt")); n != 1 {
		t.Errorf("the cut Bash call started %d times, want once", n)
	}
}

// TestUsageOfAResponseCutMidStreamCounts: the model API (a fake on
// loopback) begins a response — its message_start, which reports the
// input billed, reaches the client — and then stalls; the run is killed
// (SIGKILL) while the response streams, before its turn was journaled.
// The usage the stream had reported is in the journal all the same
// (model.usage), so the resumed run's usage is what the server billed for
// both responses, the cut one's included.
func TestUsageOfAResponseCutMidStreamCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a run: skipped with -short")
	}
	var requests atomic.Int32
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if requests.Add(1) == 1 {
			// message_start (1,000 input tokens, 1 output token), then
			// silence until the client is gone.
			return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 100}, Text: "never finished",
				Fault: &fakellm.Fault{StallAfter: 1}}
		}
		return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 50}, Text: "ALL_DONE"}
	}})
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "streamed", "description": "a response the run is killed in while it streams",
  "runner": {"model": "anthropic:claude-sonnet-4-5", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": [], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "streamed", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Say the keyword.",
	})
	wd := t.TempDir()
	// The client has read message_start when its usage is journaled.
	run := killedRun(t, dir, wd, srv.URL, func(done <-chan error) {
		waitUntil(t, done, "its response's usage was journaled", func() bool {
			list, err := testStore(t).List(wd)
			return err == nil && len(list) == 1 && strings.Contains(readFileT(t, list[0].Path), `"type":"model.usage"`)
		})
	})
	if strings.Contains(readFileT(t, run.Path), `"type":"model.turn"`) {
		t.Fatal("the cut response's turn was journaled: the kill came after the stream, not in it")
	}
	res := resumeToEnd(t, run.ID)
	if n := requests.Load(); n != 2 {
		t.Fatalf("the server got %d requests, want 2 (the cut one, asked again once)", n)
	}
	if got := res.Usage; got.Input() != 2000 || got.OutputTokens != 51 {
		t.Errorf("resumed run's usage %+v (input %d), want what the server billed: 2000 input tokens, 1 + 50 output tokens", got, got.Input())
	}
}

// TestUsageOfAnOpenAIResponseCutMidStream: the OpenAI-compatible model
// API (a fake on loopback) begins a response and stalls; the run is
// killed (SIGKILL) while the response streams. Such a server reports a
// response's usage only in the stream's last chunk, after the
// finish_reason: when the kill comes after that chunk, the usage it told
// is in the journal and the resumed run's usage is exact; when it comes
// before, the cut response's tokens are known to nobody, and the resumed
// run says so — its result's usageUnreported counts the response, and
// capstan show says the usage and cost are lower bounds and what they
// miss.
func TestUsageOfAnOpenAIResponseCutMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a run: skipped with -short")
	}
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "streamed", "description": "a response the run is killed in while it streams",
  "runner": {"model": "openai:gpt-4.1", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": [], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "streamed", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Say the keyword.",
	})
	for _, tc := range []struct {
		name string
		// stallAfter is the stream event the fake server stalls after: the
		// first chunk, or the usage chunk (the role chunk, the text in two
		// halves, the finish_reason, the usage).
		stallAfter int
		// usageEvents are the model.usage events of the cut response the
		// kill waits for.
		usageEvents       int
		input, output     int64
		unreported        int
		showSays, showNot string
	}{
		{name: "before its usage", stallAfter: 1, usageEvents: 1, input: 1000, output: 50, unreported: 1,
			showSays: "usage and cost are lower bounds: they miss the input and output tokens of 1 response cut while streaming (by a kill"},
		{name: "after its usage", stallAfter: 5, usageEvents: 2, input: 2000, output: 150, showNot: "lower bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := fakellm.NewOpenAI(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
				if requests.Add(1) == 1 {
					return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 100}, Text: "never finished",
						Fault: &fakellm.Fault{StallAfter: tc.stallAfter}}
				}
				return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 50}, Text: "ALL_DONE"}
			}})
			wd := t.TempDir()
			run := killedRun(t, dir, wd, srv.URL, func(done <-chan error) {
				waitUntil(t, done, "the cut response's usage events were journaled", func() bool {
					list, err := testStore(t).List(wd)
					return err == nil && len(list) == 1 && strings.Count(readFileT(t, list[0].Path), `"type":"model.usage"`) >= tc.usageEvents
				})
			})
			if strings.Contains(readFileT(t, run.Path), `"type":"model.turn"`) {
				t.Fatal("the cut response's turn was journaled: the kill came after the stream, not in it")
			}
			res := resumeToEnd(t, run.ID)
			if n := requests.Load(); n != 2 {
				t.Fatalf("the server got %d requests, want 2 (the cut one, asked again once)", n)
			}
			if got := res.Usage; got.Input() != tc.input || got.OutputTokens != tc.output || res.UsageUnreported != tc.unreported {
				t.Errorf("resumed run's usage %+v (input %d), unreported responses %d; want %d input, %d output tokens, %d unreported",
					got, got.Input(), res.UsageUnreported, tc.input, tc.output, tc.unreported)
			}
			out, err := cliCommand("show", run.ID).CombinedOutput()
			if err != nil {
				t.Fatalf("show: %v\n%s", err, out)
			}
			if tc.showSays != "" && !strings.Contains(string(out), tc.showSays) {
				t.Errorf("show does not say %q:\n%s", tc.showSays, out)
			}
			if tc.showNot != "" && strings.Contains(string(out), tc.showNot) {
				t.Errorf("show says %q of a usage the server reported:\n%s", tc.showNot, out)
			}
		})
	}
}

// TestUsageOfADroppedOpenAIStreamThatWasRetried: the OpenAI-compatible
// model API (a fake on loopback) drops the stream of the first iteration's
// response after its first chunk, before its usage; capstan retries and
// the retry answers. The server billed the dropped request and never says
// how much, so the run counts it in usageUnreported, and the count
// survives a kill in the second iteration (its response stalled before
// its usage: a second unreported response) and the resume: the resumed
// run's usage is the two answers' exactly, with 2 unreported responses,
// and capstan show says what the figures miss.
func TestUsageOfADroppedOpenAIStreamThatWasRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a run: skipped with -short")
	}
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "dropped", "description": "a stream dropped and retried, then a kill",
  "runner": {"model": "openai:gpt-4.1", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": [], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "dropped", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Say the keyword.",
	})
	var requests atomic.Int32
	srv := fakellm.NewOpenAI(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		u := fakellm.Usage{InputTokens: 1000, OutputTokens: 50}
		switch requests.Add(1) {
		case 1: // dropped after the role chunk: retried at once
			return fakellm.Reply{Usage: u, Text: "never finished", Fault: &fakellm.Fault{CutAfter: 1}}
		case 2:
			return fakellm.Reply{Usage: u, Text: "not yet"}
		case 3: // the second iteration's: stalls, and the run is killed
			return fakellm.Reply{Usage: u, Text: "never finished", Fault: &fakellm.Fault{StallAfter: 1}}
		}
		return fakellm.Reply{Usage: u, Text: "ALL_DONE"}
	}})
	wd := t.TempDir()
	run := killedRun(t, dir, wd, srv.URL, func(done <-chan error) {
		// The first iteration journals three model.usage events (the
		// dropped attempt's and the answer's start, the answer's end):
		// the kill waits for the second iteration's own.
		waitUntil(t, done, "the second iteration's response began", func() bool {
			list, err := testStore(t).List(wd)
			return err == nil && len(list) == 1 && strings.Contains(readFileT(t, list[0].Path), `"type":"model.usage","iteration":2,`)
		})
	})
	if j := readFileT(t, run.Path); !strings.Contains(j, `"unreported_attempts":1`) || !strings.Contains(j, `"usageUnreported":1`) {
		t.Fatalf("the journal does not count the dropped attempt in the turn and the iteration:\n%s", j)
	}
	res := resumeToEnd(t, run.ID)
	if n := requests.Load(); n != 4 {
		t.Fatalf("the server got %d requests, want 4 (dropped, answered, cut by the kill, answered)", n)
	}
	if got := res.Usage; got.Input() != 2000 || got.OutputTokens != 100 || res.UsageUnreported != 2 {
		t.Errorf("resumed run's usage %+v (input %d), unreported responses %d; want the two answers' 2000 input and 100 output tokens, and 2 unreported",
			got, got.Input(), res.UsageUnreported)
	}
	out, err := cliCommand("show", run.ID).CombinedOutput()
	if err != nil {
		t.Fatalf("show: %v\n%s", err, out)
	}
	if want := "they miss the input and output tokens of 2 responses cut while streaming (by a kill, or a dropped connection"; !strings.Contains(string(out), want) {
		t.Errorf("show does not say %q:\n%s", want, out)
	}
}

// killedRun starts the agent in dir on the work dir wd against the fake
// Anthropic API at url, waits until until returns, kills the run and
// every process it started (SIGKILL: the machine dies) and returns its
// journal.
func killedRun(t *testing.T, dir, wd, url string, until func(done <-chan error)) journal.Run {
	t.Helper()
	run := cliCommand("run", dir, "--workdir", wd, "--base-url", url, "--quiet")
	run.Env = append(run.Env, "ANTHROPIC_API_KEY="+clitest.FakeKey, "OPENAI_API_KEY="+clitest.FakeKey)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	until(done)
	_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
	<-done
	list, err := testStore(t).List(wd)
	if err != nil || len(list) != 1 {
		t.Fatalf("runs of %s: %v %v", wd, list, err)
	}
	return list[0]
}

// resumeToEnd resumes run id and returns its result, which must be a
// completed run.
func resumeToEnd(t *testing.T, id string) event.RunResult {
	t.Helper()
	resume := cliCommand("resume", id, "--json")
	resume.Env = append(resume.Env, "ANTHROPIC_API_KEY="+clitest.FakeKey, "OPENAI_API_KEY="+clitest.FakeKey)
	var stdout, stderr bytes.Buffer
	resume.Stdout, resume.Stderr = &stdout, &stderr
	if err := resume.Run(); err != nil {
		t.Fatalf("resume: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var res event.RunResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || !res.Success {
		t.Fatalf("the resumed run did not complete: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	return res
}
