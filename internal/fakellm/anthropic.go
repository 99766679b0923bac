package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

type aBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
}

type aMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type aRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int64          `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []aMessage      `json:"messages"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream       bool `json:"stream"`
	OutputConfig *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// blocks decodes message content: a string is one text block.
func blocks(raw json.RawMessage) ([]aBlock, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []aBlock{{Type: "text", Text: s}}, nil
	}
	var bs []aBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("content must be a string or an array of content blocks")
	}
	return bs, nil
}

// blockText renders tool_result content (a string or text blocks).
func blockText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []aBlock
	if json.Unmarshal(raw, &bs) == nil {
		var b strings.Builder
		for _, x := range bs {
			b.WriteString(x.Text)
		}
		return b.String()
	}
	return string(raw)
}

// decodeAnthropic parses and validates a Messages request the way the real
// API does; a returned error is a 400 invalid_request_error.
func decodeAnthropic(body []byte, countOnly bool) (Request, error) {
	var ar aRequest
	if err := json.Unmarshal(body, &ar); err != nil {
		return Request{}, fmt.Errorf("invalid JSON body: %v", err)
	}
	req := Request{Dialect: Anthropic, Model: ar.Model, Stream: ar.Stream, Body: body, Messages: len(ar.Messages)}
	if ar.Model == "" {
		return req, fmt.Errorf("model: field required")
	}
	if !countOnly && (ar.MaxTokens == nil || *ar.MaxTokens < 1) {
		return req, fmt.Errorf("max_tokens: field required (>= 1)")
	}
	if len(ar.System) > 0 && string(ar.System) != "null" {
		sys, err := blocks(ar.System)
		if err != nil {
			return req, fmt.Errorf("system: %v", err)
		}
		for _, b := range sys {
			if b.Type != "text" {
				return req, fmt.Errorf("system: only text blocks are allowed")
			}
			req.System += b.Text
		}
	}
	for _, t := range ar.Tools {
		if t.Name == "" {
			return req, fmt.Errorf("tools: name required")
		}
		req.Tools = append(req.Tools, t.Name)
	}
	req.HasOutputSchema = ar.OutputConfig != nil && ar.OutputConfig.Format != nil
	if req.HasOutputSchema && (ar.OutputConfig.Format.Type != "json_schema" || len(ar.OutputConfig.Format.Schema) == 0) {
		return req, fmt.Errorf("output_config.format: type json_schema with a schema required")
	}
	if len(ar.Messages) == 0 {
		return req, fmt.Errorf("messages: at least one message is required")
	}
	var pendingUses map[string]bool
	turn := 0 // position among user/assistant messages
	last := ""
	for i, m := range ar.Messages {
		if m.Role == "system" {
			// Mid-conversation system messages (the Claude Code CLI sends
			// its environment this way) take no part in alternation.
			bs, err := blocks(m.Content)
			if err != nil {
				return req, fmt.Errorf("messages.%d.content: %v", i, err)
			}
			for _, b := range bs {
				req.System += b.Text
			}
			continue
		}
		want := "user"
		if turn%2 == 1 {
			want = "assistant"
		}
		turn++
		last = m.Role
		if m.Role != want {
			return req, fmt.Errorf("messages.%d.role: roles must alternate starting with user; got %q", i, m.Role)
		}
		bs, err := blocks(m.Content)
		if err != nil {
			return req, fmt.Errorf("messages.%d.content: %v", i, err)
		}
		if len(bs) == 0 {
			return req, fmt.Errorf("messages.%d.content: must not be empty", i)
		}
		if m.Role == "assistant" {
			pendingUses = map[string]bool{}
			for _, b := range bs {
				if b.Type == "tool_use" {
					if b.ID == "" || b.Name == "" {
						return req, fmt.Errorf("messages.%d: tool_use needs id and name", i)
					}
					pendingUses[b.ID] = true
				}
			}
			continue
		}
		var text strings.Builder
		var results []string
		for j, b := range bs {
			switch b.Type {
			case "tool_result":
				if !pendingUses[b.ToolUseID] {
					return req, fmt.Errorf("messages.%d.content.%d: unexpected tool_use_id %q in tool_result blocks: each tool_result block must have a corresponding tool_use block in the previous message", i, j, b.ToolUseID)
				}
				delete(pendingUses, b.ToolUseID)
				req.ToolResults++
				results = append(results, blockText(b.Content))
			case "text":
				text.WriteString(b.Text)
			}
		}
		if len(pendingUses) > 0 {
			for id := range pendingUses {
				return req, fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
			}
		}
		pendingUses = nil
		req.LastUserText = text.String()
		req.LastToolResults = results
	}
	if turn == 0 {
		return req, fmt.Errorf("messages: at least one user message is required")
	}
	req.Messages = turn
	if last != "user" {
		return req, fmt.Errorf("messages: the last message must be a user message (assistant prefill is not supported by this model)")
	}
	return req, nil
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, body []byte) {
	countOnly := r.URL.Path == "/v1/messages/count_tokens"
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/messages" && !countOnly) {
		s.fail(w, r, body, Request{}, http.StatusNotFound, "", "", fmt.Sprintf("%s %s not found", r.Method, r.URL.Path))
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		s.fail(w, r, body, Request{}, http.StatusBadRequest, "", "", "anthropic-version: header is required")
		return
	}
	key := bearer(r)
	if key == "" || (s.opts.APIKey != "" && key != s.opts.APIKey) {
		s.fail(w, r, body, Request{}, http.StatusUnauthorized, "", "", "invalid x-api-key")
		return
	}
	req, err := decodeAnthropic(body, countOnly)
	if err != nil {
		s.fail(w, r, body, req, http.StatusBadRequest, "", "", err.Error())
		return
	}
	if err := s.checkThinking(body); err != nil {
		s.fail(w, r, body, req, http.StatusBadRequest, "", "", err.Error())
		return
	}
	if countOnly {
		s.record(r, body, req, http.StatusOK)
		writeJSON(w, map[string]int64{"input_tokens": estimate(len(body))}, nil)
		return
	}
	cu, commit, err := s.cache.anthropic(body, s.opts.CacheMinTokens)
	if err != nil {
		s.fail(w, r, body, req, http.StatusBadRequest, "", "", err.Error())
		return
	}
	if win := s.opts.ContextWindow; win > 0 && cu.Total > win {
		s.fail(w, r, body, req, http.StatusBadRequest, "", "", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", cu.Total, win))
		return
	}
	s.answer(w, r, body, req, func(rp Reply) {
		commit()
		writeAnthropicReply(r, w, s, req, rp, cu)
	})
}

func anthropicUsage(rp Reply, cu cacheUsage) map[string]int64 {
	u := rp.Usage
	if u.InputTokens == 0 && u.CacheReadTokens == 0 && u.CacheWriteTokens == 0 {
		u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens = cu.Uncached(), cu.Read, cu.Write
	}
	if u.OutputTokens == 0 {
		n := len(rp.replyText())
		for _, c := range rp.ToolCalls {
			n += len(c.Name) + len(c.Input)
		}
		u.OutputTokens = estimate(n)
	}
	return map[string]int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens, "cache_read_input_tokens": u.CacheReadTokens}
}

// checkThinking enforces that thinking blocks issued with tool calls come
// back first and unchanged in the assistant message holding those calls.
func (s *Server) checkThinking(body []byte) error {
	s.mu.Lock()
	issued := len(s.thinking) > 0
	s.mu.Unlock()
	if !issued {
		return nil
	}
	var ar aRequest
	if json.Unmarshal(body, &ar) != nil {
		return nil
	}
	for i, m := range ar.Messages {
		if m.Role != "assistant" {
			continue
		}
		bs, err := blocks(m.Content)
		if err != nil {
			continue
		}
		for _, b := range bs {
			if b.Type != "tool_use" {
				continue
			}
			s.mu.Lock()
			sig, ok := s.thinking[b.ID]
			s.mu.Unlock()
			if ok && (bs[0].Type != "thinking" || bs[0].Signature != sig) {
				return fmt.Errorf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)", i, bs[0].Type)
			}
		}
	}
	return nil
}

func writeAnthropicReply(r *http.Request, w http.ResponseWriter, s *Server, req Request, rp Reply, cu cacheUsage) {
	content := s.anthropicContent(rp)
	stop := rp.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(rp.ToolCalls) > 0 {
			stop = "tool_use"
		}
	}
	usage := anthropicUsage(rp, cu)
	msgID := s.nextID("msg_")
	if !req.Stream {
		writeJSON(w, map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage}, rp.Fault)
		return
	}
	e := startSSE(r, w, Anthropic, rp)
	startUsage := map[string]int64{"input_tokens": usage["input_tokens"], "output_tokens": 1,
		"cache_creation_input_tokens": usage["cache_creation_input_tokens"], "cache_read_input_tokens": usage["cache_read_input_tokens"]}
	steps := []struct {
		name string
		data any
	}{{"message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": msgID, "type": "message",
		"role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": startUsage}}}}
	add := func(name string, data any) {
		steps = append(steps, struct {
			name string
			data any
		}{name, data})
	}
	for i, b := range content {
		switch b["type"] {
		case "thinking":
			add("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, frag := range splitHalf(b["thinking"].(string)) {
				add("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": frag}})
			}
			add("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b["signature"]}})
		case "text":
			add("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			if i == 0 {
				add("ping", map[string]any{"type": "ping"})
			}
			for _, frag := range splitText(b["text"].(string), rp.ChunkSize) {
				add("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": frag}})
			}
		case "tool_use":
			add("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			for _, frag := range splitHalf(string(b["input"].(json.RawMessage))) {
				add("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
			}
		}
		add("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	add("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int64{"output_tokens": usage["output_tokens"]}})
	add("message_stop", map[string]any{"type": "message_stop"})
	for _, st := range steps {
		if e.event(st.name, st.data) != nil {
			return
		}
	}
}

// anthropicContent is the content blocks of a reply: thinking (whose
// signature the server keeps for each tool call), text and tool calls.
func (s *Server) anthropicContent(rp Reply) []map[string]any {
	var content []map[string]any
	sig := ""
	if rp.Thinking != "" {
		sig = s.nextID("sig_")
		content = append(content, map[string]any{"type": "thinking", "thinking": rp.Thinking, "signature": sig})
	}
	if t := rp.replyText(); t != "" {
		content = append(content, map[string]any{"type": "text", "text": t})
	}
	for _, c := range rp.ToolCalls {
		id := c.ID
		if id == "" {
			id = s.nextID("toolu_")
		}
		content = append(content, map[string]any{"type": "tool_use", "id": id, "name": c.Name, "input": inputOrEmpty(c.Input)})
		if sig != "" {
			s.mu.Lock()
			if s.thinking == nil {
				s.thinking = map[string]string{}
			}
			s.thinking[id] = sig
			s.mu.Unlock()
		}
	}
	if content == nil {
		content = []map[string]any{}
	}
	return content
}
