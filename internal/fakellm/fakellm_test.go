package fakellm

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, s *Server, path, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(s.URL, "/v1")+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

var aHdr = map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "k"}

func TestAnthropicRejectsInvalidRequests(t *testing.T) {
	s := NewAnthropic(t, Options{Respond: func(Request) Reply { return Reply{Text: "ok"} }})
	cases := map[string]string{
		"no messages":         `{"model":"m","max_tokens":5,"messages":[]}`,
		"no max_tokens":       `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
		"no model":            `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		"assistant first":     `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":"x"}]}`,
		"not alternating":     `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}`,
		"orphan tool_result":  `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`,
		"missing tool_result": `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"A","input":{}}]},{"role":"user","content":"y"}]}`,
		"prefill":             `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`,
		"empty content":       `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[]}]}`,
		"bad json":            `{"model":`,
	}
	for name, body := range cases {
		resp, out := post(t, s, "/v1/messages", body, aHdr)
		if resp.StatusCode != 400 || !strings.Contains(out, "invalid_request_error") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, out)
		}
	}
	if resp, _ := post(t, s, "/v1/messages", `{}`, map[string]string{"x-api-key": "k"}); resp.StatusCode != 400 {
		t.Errorf("missing anthropic-version: %d", resp.StatusCode)
	}
	if resp, out := post(t, s, "/v1/messages", `{}`, map[string]string{"anthropic-version": "2023-06-01"}); resp.StatusCode != 401 || !strings.Contains(out, "authentication_error") {
		t.Errorf("missing key: %d %s", resp.StatusCode, out)
	}
	if resp, out := post(t, s, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hello world"}]}`, aHdr); resp.StatusCode != 200 || !strings.Contains(out, "input_tokens") {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, out)
	}
}

func TestAnthropicSSEEventSequence(t *testing.T) {
	s := NewAnthropic(t, Options{Replies: []Reply{{Text: "Running it.", ToolCalls: []ToolCall{{ID: "toolu_1", Name: "run", Input: json.RawMessage(`{"path":"scripts/a.py"}`)}}}}})
	resp, out := post(t, s, "/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"go"}]}`, aHdr)
	if ct := resp.Header.Get("content-type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	var names []string
	var partial strings.Builder
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, n)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, "input_json_delta") {
			var ev struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			_ = json.Unmarshal([]byte(d), &ev)
			partial.WriteString(ev.Delta.PartialJSON)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events:\n%s\nwant\n%s", got, want)
	}
	if partial.String() != `{"path":"scripts/a.py"}` {
		t.Fatalf("partial json = %q", partial.String())
	}
}

func TestOpenAIValidationAndStreamShape(t *testing.T) {
	s := NewOpenAI(t, Options{APIKey: "sk", Replies: []Reply{{ToolCalls: []ToolCall{{Name: "f", Input: json.RawMessage(`{"a":1}`)}}}}})
	auth := map[string]string{"Authorization": "Bearer sk"}
	for name, body := range map[string]string{
		"orphan tool":       `{"model":"m","messages":[{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
		"unanswered call":   `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"y"}]}`,
		"args not JSON":     `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{"}}]}]}`,
		"no messages":       `{"model":"m","messages":[]}`,
		"bad schema format": `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{}}}`,
	} {
		if resp, out := post(t, s, "/v1/chat/completions", body, auth); resp.StatusCode != 400 {
			t.Errorf("%s: %d %s", name, resp.StatusCode, out)
		}
	}
	if resp, _ := post(t, s, "/v1/chat/completions", `{}`, map[string]string{"Authorization": "Bearer wrong"}); resp.StatusCode != 401 {
		t.Errorf("wrong key: %d", resp.StatusCode)
	}
	_, out := post(t, s, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, auth)
	if strings.Contains(out, "event:") || !strings.HasSuffix(strings.TrimSpace(out), "data: [DONE]") || !strings.Contains(out, `"usage"`) {
		t.Fatalf("stream:\n%s", out)
	}
}

func TestStatelessMode(t *testing.T) {
	s := NewOpenAI(t, Options{Stateless: 2})
	msgs := `[{"role":"user","content":"x"}]`
	body := func(m string) string {
		return `{"model":"m","tools":[{"type":"function","function":{"name":"probe"}}],"messages":` + m + `}`
	}
	_, out := post(t, s, "/v1/chat/completions", body(msgs), nil)
	if !strings.Contains(out, `"name":"probe"`) {
		t.Fatalf("first reply should call the tool: %s", out)
	}
	m2 := `[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"probe","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"},` +
		`{"role":"assistant","tool_calls":[{"id":"b","type":"function","function":{"name":"probe","arguments":"{}"}}]},{"role":"tool","tool_call_id":"b","content":"r"}]`
	_, out = post(t, s, "/v1/chat/completions", body(m2), nil)
	if !strings.Contains(out, `"content":"done"`) {
		t.Fatalf("after K results the reply is final: %s", out)
	}
}

func TestInMemoryServerAndExhaustedQueue(t *testing.T) {
	s := Start(Anthropic, Options{InMemory: true, Replies: []Reply{{Text: "one"}}})
	defer s.Close()
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"go"}]}`
	if resp, out := post(t, s, "/v1/messages", body, aHdr); resp.StatusCode != 200 || !strings.Contains(out, `"one"`) {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	resp, out := post(t, s, "/v1/messages", body, aHdr)
	if resp.StatusCode != 400 || !strings.Contains(out, "the script had 1") {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if s.Remaining() != 0 || len(s.Requests()) != 2 || s.Requests()[0].Header.Get("X-Api-Key") != "REDACTED" {
		t.Fatalf("requests = %+v", s.Requests())
	}
}

func FuzzDecodeAnthropic(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"A","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":7}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeAnthropic(body, false)
		if err == nil && (req.Messages == 0 || req.Messages%2 == 0) {
			t.Fatalf("accepted %d messages", req.Messages)
		}
	})
}

func FuzzDecodeOpenAI(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, err := decodeOpenAI(body)
		if err == nil && req.Model == "" {
			t.Fatal("accepted a request without model")
		}
	})
}

func TestSplitTextChunkSize(t *testing.T) {
	for _, tc := range []struct {
		s    string
		size int
		want []string
	}{
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"ab世界", 3, []string{"ab", "世", "界"}},
		{"世", 1, []string{"世"}},
		{"abcd", 0, []string{"ab", "cd"}},
	} {
		got := splitText(tc.s, tc.size)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("splitText(%q, %d) = %q, want %q", tc.s, tc.size, got, tc.want)
		}
	}
}
