package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// aBody builds a Messages request whose user messages are the given
// texts (alternating with short assistant answers); marked lists the
// message indexes whose block carries cache_control.
func aBody(texts []string, marked ...int) string {
	var msgs []string
	for i, t := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		cc := ""
		for _, m := range marked {
			if m == i {
				cc = `,"cache_control":{"type":"ephemeral"}`
			}
		}
		b, _ := json.Marshal(t)
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":[{"type":"text","text":%s%s}]}`, role, b, cc))
	}
	return `{"model":"claude-sonnet-5","max_tokens":5,"messages":[` + strings.Join(msgs, ",") + `]}`
}

func anthropicUsageOf(t *testing.T, s *Server, body string) map[string]int64 {
	t.Helper()
	resp, out := post(t, s, "/v1/messages", body, aHdr)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var m struct{ Usage map[string]int64 }
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m.Usage
}

func TestAnthropicCacheWritesThenReadsThePrefix(t *testing.T) {
	s := NewAnthropic(t, Options{Respond: func(Request) Reply { return Reply{Text: "ok"} }})
	big := strings.Repeat("x", 8000) // 2,000 tokens, above the 1,024 minimum
	first := anthropicUsageOf(t, s, aBody([]string{big}, 0))
	if first["cache_creation_input_tokens"] < 2000 || first["cache_read_input_tokens"] != 0 {
		t.Fatalf("first request should write the prefix: %v", first)
	}
	// The next turn marks its newest message and the previous one.
	second := anthropicUsageOf(t, s, aBody([]string{big, "ok", strings.Repeat("y", 400)}, 0, 2))
	if second["cache_read_input_tokens"] != first["cache_creation_input_tokens"] {
		t.Fatalf("second request should read what the first wrote: first %v second %v", first, second)
	}
	if second["cache_creation_input_tokens"] == 0 || second["input_tokens"] > 20 {
		t.Fatalf("second request should write only its new part: %v", second)
	}
}

func TestAnthropicCacheIgnoresShortPrefixesAndLimitsBreakpoints(t *testing.T) {
	s := NewAnthropic(t, Options{Respond: func(Request) Reply { return Reply{Text: "ok"} }})
	short := aBody([]string{"hello"}, 0)
	for i := 0; i < 2; i++ {
		u := anthropicUsageOf(t, s, short)
		if u["cache_creation_input_tokens"] != 0 || u["cache_read_input_tokens"] != 0 {
			t.Fatalf("a prefix below the minimum cacheable length must not be cached: %v", u)
		}
	}
	resp, out := post(t, s, "/v1/messages", aBody([]string{"a", "b", "c", "d", "e"}, 0, 1, 2, 3, 4), aHdr)
	if resp.StatusCode != 400 || !strings.Contains(out, "A maximum of 4 blocks with cache_control") {
		t.Fatalf("five breakpoints: %d %s", resp.StatusCode, out)
	}
}

func TestAnthropicCacheLooksBackTwentyBlocksOnly(t *testing.T) {
	s := NewAnthropic(t, Options{Respond: func(Request) Reply { return Reply{Text: "ok"} }})
	texts := []string{strings.Repeat("x", 8000)}
	anthropicUsageOf(t, s, aBody(texts, 0))
	near := append([]string(nil), texts...)
	for len(near) < 21 {
		near = append(near, "ok", "more")
	}
	if u := anthropicUsageOf(t, s, aBody(near, len(near)-1)); u["cache_read_input_tokens"] == 0 {
		t.Fatalf("an entry 20 blocks back must be found: %v", u)
	}
	far := append([]string(nil), texts...)
	for len(far) < 41 {
		far = append(far, "ok", "again")
	}
	if u := anthropicUsageOf(t, s, aBody(far, len(far)-1)); u["cache_read_input_tokens"] != 0 {
		t.Fatalf("an entry 40 blocks back must not be found: %v", u)
	}
}

func TestOpenAICachesStablePrefixesIn128TokenSteps(t *testing.T) {
	s := NewOpenAI(t, Options{Respond: func(Request) Reply { return Reply{Text: "ok"} }})
	usage := func(body string) map[string]any {
		resp, out := post(t, s, "/v1/chat/completions", body, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		var m struct{ Usage map[string]any }
		_ = json.Unmarshal([]byte(out), &m)
		return m.Usage
	}
	sys, _ := json.Marshal(strings.Repeat("s", 6000))
	body := func(user string) string {
		return `{"model":"gpt-4.1","messages":[{"role":"system","content":` + string(sys) + `},{"role":"user","content":"` + user + `"}]}`
	}
	if u := usage(body("first")); u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64) != 0 {
		t.Fatalf("nothing is cached on the first request: %v", u)
	}
	cached := usage(body("second"))["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	if cached < 1024 || int(cached)%128 != 0 {
		t.Fatalf("cached_tokens = %v, want a multiple of 128 of at least 1,024", cached)
	}
}

func TestContextWindowRejectsLongPrompts(t *testing.T) {
	a := NewAnthropic(t, Options{ContextWindow: 100, Respond: func(Request) Reply { return Reply{Text: "ok"} }})
	resp, out := post(t, a, "/v1/messages", aBody([]string{strings.Repeat("x", 1000)}), aHdr)
	if resp.StatusCode != 400 || !strings.Contains(out, "prompt is too long") {
		t.Fatalf("anthropic: %d %s", resp.StatusCode, out)
	}
	o := NewOpenAI(t, Options{ContextWindow: 100, Respond: func(Request) Reply { return Reply{Text: "ok"} }})
	resp, out = post(t, o, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("x", 1000)+`"}]}`, nil)
	if resp.StatusCode != 400 || !strings.Contains(out, "context_length_exceeded") {
		t.Fatalf("openai: %d %s", resp.StatusCode, out)
	}
}
