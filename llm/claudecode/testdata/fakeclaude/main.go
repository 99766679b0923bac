// Command fakeclaude imitates the claude CLI's headless stream-json mode
// for the claudecode driver's tests. FAKE_CLAUDE_SCENARIO picks the
// behaviour; FAKE_CLAUDE_LOG, when set, receives the argv and the stdin
// lines as JSON; FAKE_CLAUDE_CALLS, when set, gets one line of JSON argv
// appended per run, written first thing.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func flag(name string) (string, bool) {
	for i, a := range os.Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(os.Args) {
			return os.Args[i+1], true
		}
	}
	return "", false
}

func main() {
	if p := os.Getenv("FAKE_CLAUDE_CALLS"); p != "" {
		b, _ := json.Marshal(os.Args[1:])
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.Write(append(b, '\n'))
			_ = f.Close()
		}
	}
	scenario := os.Getenv("FAKE_CLAUDE_SCENARIO")
	// Option errors come from the CLI's argument parser (commander), on
	// stderr with exit status 1, before stdin is read or a frame printed.
	switch scenario {
	case "old-cli":
		// A CLI from before --include-partial-messages; without the
		// option it behaves like "stream".
		if slices.Contains(os.Args[1:], "--include-partial-messages") {
			fmt.Fprintln(os.Stderr, "error: unknown option '--include-partial-messages'")
			os.Exit(1)
		}
		scenario = "stream"
	case "other-unknown-option":
		// Another option is unknown; commander's suggestion names
		// --include-partial-messages on the next line.
		fmt.Fprintln(os.Stderr, "error: unknown option '--include-partial'\n(Did you mean --include-partial-messages?)")
		os.Exit(1)
	case "unknown-option-after-frames":
		// Not an argument error: the message comes after output started.
		emit(map[string]any{"type": "system", "subtype": "init", "session_id": "sess-new-1"})
		fmt.Fprintln(os.Stderr, "error: unknown option '--include-partial-messages'")
		os.Exit(1)
	}
	in := bufio.NewReader(os.Stdin)
	line, _ := in.ReadString('\n')
	if p := os.Getenv("FAKE_CLAUDE_LOG"); p != "" {
		b, _ := json.Marshal(map[string]any{"args": os.Args[1:], "stdin": line, "env_key": os.Getenv("ANTHROPIC_API_KEY"), "env_base_url": os.Getenv("ANTHROPIC_BASE_URL"), "pwd": must(os.Getwd()), "env": os.Environ()})
		_ = os.WriteFile(p, b, 0o644)
	}
	var msg struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	_ = json.Unmarshal([]byte(line), &msg)
	prompt := msg.Message.Content
	sid := "sess-new-1"
	resume, resumed := flag("--resume")
	switch {
	case resumed && scenario == "unknown-session":
		fmt.Fprintf(os.Stderr, "Error: No conversation found with session ID: %s\n", resume)
		os.Exit(1)
	case resumed && scenario == "renew":
		sid = "sess-renewed-2"
	case resumed:
		sid = resume
	}
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": sid, "cwd": must(os.Getwd()), "model": "claude-fake",
		"tools": []string{"Read", "Bash"}, "mcp_servers": []any{}, "permissionMode": "default", "apiKeySource": "ANTHROPIC_API_KEY",
		"claude_code_version": "9.9.9", "future_field": map[string]any{"x": 1}, "uuid": "u1"})
	asst := func(content ...map[string]any) {
		emit(map[string]any{"type": "assistant", "session_id": sid, "uuid": "u", "parent_tool_use_id": nil,
			"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-fake", "content": content,
				"stop_reason": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}})
	}
	result := func(extra map[string]any) {
		r := map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": "Done.", "num_turns": 2,
			"duration_ms": 12, "duration_api_ms": 10, "total_cost_usd": 0.0123, "session_id": sid, "uuid": "u9",
			"usage":      map[string]any{"input_tokens": 40, "output_tokens": 55, "cache_creation_input_tokens": 7, "cache_read_input_tokens": 100},
			"modelUsage": map[string]any{}, "permission_denials": []any{}, "stop_reason": "end_turn", "terminal_reason": "completed"}
		for k, v := range extra {
			r[k] = v
		}
		emit(r)
	}
	switch scenario {
	case "hang":
		cmd := exec.Command("sleep", "300")
		_ = cmd.Start()
		if p := os.Getenv("FAKE_CLAUDE_CHILD"); p != "" {
			_ = os.WriteFile(p, []byte(fmt.Sprint(cmd.Process.Pid)), 0o644)
		}
		_ = cmd.Wait()
		return
	case "auth-retry":
		// Like the real CLI with a rejected key: api_retry frames with
		// growing delays, for minutes.
		for i := 1; i <= 10; i++ {
			emit(map[string]any{"type": "system", "subtype": "api_retry", "attempt": i, "max_retries": 10, "retry_delay_ms": 500 << i,
				"error_status": 401, "error": "authentication_failed", "session_id": sid})
			time.Sleep(time.Duration(500<<i) * time.Millisecond)
		}
		os.Exit(1)
	case "crash":
		fmt.Fprintln(os.Stderr, "fatal: something broke with key "+os.Getenv("ANTHROPIC_API_KEY"))
		os.Exit(2)
	case "rate-limit":
		emit(map[string]any{"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 2, "retry_delay_ms": 500, "error_status": 429, "session_id": sid})
		emit(map[string]any{"type": "assistant", "session_id": sid, "error": "rate_limit", "parent_tool_use_id": nil,
			"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "API Error: 429 rate limited"}}}})
		result(map[string]any{"is_error": true, "result": "API Error: 429 {\"type\":\"error\"}", "api_error_status": 429})
		os.Exit(1)
	case "max-turns":
		result(map[string]any{"subtype": "error_max_turns", "is_error": true, "result": "", "num_turns": 3, "terminal_reason": "max_turns"})
		os.Exit(1)
	case "auth":
		result(map[string]any{"is_error": true, "result": "Invalid API key · Please run /login", "api_error_status": 401})
		os.Exit(1)
	case "long":
		big := strings.Repeat("x", 2<<20)
		asst(map[string]any{"type": "tool_use", "id": "toolu_big", "name": "Read", "input": map[string]any{"file_path": "big.txt"}})
		emit(map[string]any{"type": "user", "session_id": sid, "parent_tool_use_id": nil,
			"message":         map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_big", "content": big}}},
			"tool_use_result": map[string]any{"file": map[string]any{"content": big}}})
		asst(map[string]any{"type": "text", "text": "read " + fmt.Sprint(len(big)) + " bytes"})
		result(nil)
		return
	case "structured":
		asst(map[string]any{"type": "text", "text": "here"})
		result(map[string]any{"structured_output": map[string]any{"status": "completed", "count": 3}})
		return
	case "structured-in-text":
		result(map[string]any{"result": "Sure! Here it is:\n```json\n{\"status\": \"completed\", \"count\": 4}\n```\n"})
		return
	case "stream":
		// Partial messages (stream_event frames) only when asked for, as
		// the real CLI does; the second text is cut by an API retry and
		// sent again from its beginning.
		partial := slices.Contains(os.Args[1:], "--include-partial-messages")
		deltas := func(parts ...string) {
			if !partial {
				return
			}
			emit(map[string]any{"type": "stream_event", "session_id": sid, "parent_tool_use_id": nil,
				"event": map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}})
			for _, p := range parts {
				emit(map[string]any{"type": "stream_event", "session_id": sid, "parent_tool_use_id": nil,
					"event": map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": p}}})
			}
		}
		deltas("Let me ", "look.")
		asst(map[string]any{"type": "text", "text": "Let me look."})
		asst(map[string]any{"type": "tool_use", "id": "toolu_s1", "name": "Bash", "input": map[string]any{"command": "go test ./..."}})
		emit(map[string]any{"type": "user", "session_id": sid, "parent_tool_use_id": nil,
			"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_s1",
				"content": "FAIL", "is_error": true}}}})
		// A sub-agent's text is not streamed.
		emit(map[string]any{"type": "stream_event", "session_id": sid, "parent_tool_use_id": "toolu_x",
			"event": map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "SUBAGENT"}}})
		deltas("Tests fa")
		emit(map[string]any{"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 3, "retry_delay_ms": 1, "error_status": 529, "session_id": sid})
		deltas("Tests ", "fail.")
		asst(map[string]any{"type": "text", "text": "Tests fail."})
		result(map[string]any{"result": "Tests fail."})
		return
	case "echo-secret":
		// A model that knows a key writes it everywhere the CLI reports.
		key := os.Getenv("FAKE_CLAUDE_ECHO")
		asst(map[string]any{"type": "text", "text": "the key is " + key},
			map[string]any{"type": "tool_use", "id": "toolu_e1", "name": "Bash", "input": map[string]any{"command": "echo " + key}})
		emit(map[string]any{"type": "user", "session_id": sid, "parent_tool_use_id": nil,
			"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_e1",
				"content": key + "\n"}}}})
		result(map[string]any{"result": "done: " + key, "structured_output": map[string]any{"status": "completed", "key": key}})
		return
	case "structured-invalid":
		result(map[string]any{"structured_output": map[string]any{"status": 7}, "result": "no json here"})
		return
	}
	// default: a tool call, its result, a denied call, then the final text.
	emit(map[string]any{"type": "stream_event", "event": map[string]any{"type": "ping"}, "session_id": sid})
	emit(map[string]any{"type": "telemetry_from_the_future", "session_id": sid, "payload": []int{1, 2}})
	fmt.Println("this line is not json")
	asst(map[string]any{"type": "text", "text": "Reading the file."},
		map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": map[string]any{"file_path": "/w/a.txt"}})
	emit(map[string]any{"type": "user", "session_id": sid, "parent_tool_use_id": nil,
		"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1",
			"content": []any{map[string]any{"type": "text", "text": "hello from a.txt"}}}}}})
	asst(map[string]any{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": map[string]any{"command": "rm -rf /"}})
	emit(map[string]any{"type": "user", "session_id": sid, "parent_tool_use_id": nil,
		"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_2",
			"content": "Claude requested permissions to use Bash, but you haven't granted it yet.", "is_error": true}}}})
	asst(map[string]any{"type": "text", "text": "You said: " + prompt})
	result(map[string]any{"result": "You said: " + prompt, "permission_denials": []any{map[string]any{"tool_name": "Bash", "tool_use_id": "toolu_2", "tool_input": map[string]any{"command": "rm -rf /"}}}})
	// Like the real CLI in stream-json input mode: wait for stdin to close.
	deadline := time.After(10 * time.Second)
	eof := make(chan struct{})
	go func() { _, _ = in.ReadString(0); close(eof) }()
	select {
	case <-eof:
	case <-deadline:
		fmt.Fprintln(os.Stderr, "stdin was never closed")
		os.Exit(3)
	}
}

func must(s string, _ error) string { return s }
