package fakellm

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"github.com/capstan-dev/capstan/llm"
	"sync"
)

// Prompt-cache accounting, done the way the real APIs do it so that token
// figures measured against the fake are honest.
//
// Anthropic: a request's prompt is the sequence tools → system → message
// content blocks. A block carrying cache_control is a breakpoint (at most
// four; more is a 400). A request reads the longest prefix that an earlier
// request wrote, looking at each breakpoint and up to 20 blocks before it;
// it writes the prefix up to each breakpoint whose prefix is at least the
// model's minimum cacheable length. input_tokens counts what is neither
// read nor written.
//
// OpenAI: caching is automatic. The prompt (tools, then messages) shares a
// prefix with an earlier prompt; from 1,024 tokens on, that prefix is
// reported as prompt_tokens_details.cached_tokens in 128-token steps.
//
// Tokens are estimated at four bytes each of the prompt's blocks (tool
// definitions, system text, message blocks; the request's own JSON framing
// is not counted), as everywhere in the fake. The cache has no expiry
// (tests run well within the five-minute TTL).

// MaxCacheBreakpoints is the Anthropic API's limit on cache_control blocks
// per request.
const MaxCacheBreakpoints = 4

// anthropicLookback is how many block positions before a breakpoint the
// Anthropic API checks for an earlier cache entry.
const anthropicLookback = 20

// openAICacheMin and openAICacheStep are OpenAI's automatic-caching
// threshold and granularity, in tokens.
const (
	openAICacheMin  = 1024
	openAICacheStep = 128
)

// openAIPromptsKept bounds the earlier prompts the OpenAI cache compares
// against.
const openAIPromptsKept = 32

// promptCache holds what earlier requests wrote.
type promptCache struct {
	mu      sync.Mutex
	written map[[sha256.Size]byte]bool // Anthropic prefix hashes
	prompts [][]byte                   // OpenAI rendered prompts, newest last
}

// cacheUsage is how a request's input tokens split.
type cacheUsage struct {
	Total, Read, Write int64
}

// Uncached is the input billed at the full rate.
func (c cacheUsage) Uncached() int64 { return c.Total - c.Read - c.Write }

// anthropicPrompt is the part of a Messages request the cache sees.
type anthropicPrompt struct {
	Model    string            `json:"model"`
	Tools    []json.RawMessage `json:"tools"`
	System   json.RawMessage   `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// anthropic accounts a valid Messages request; commit stores what it
// writes (call it only when the request is answered). It returns an error
// (a 400 for the client) when the request has more than four breakpoints.
func (c *promptCache) anthropic(body []byte, minTokens int64) (u cacheUsage, commit func(), err error) {
	commit = func() {}
	var p anthropicPrompt
	if err := json.Unmarshal(body, &p); err != nil {
		return u, commit, fmt.Errorf("invalid JSON body: %v", err)
	}
	if minTokens <= 0 {
		limits, _ := llm.ModelLimitsOf(p.Model) // the providers' published minimums
		minTokens = limits.MinCacheable
	}
	sums, tokensAt, breakpoints, cum := anthropicPrefixes(p)
	u = cacheUsage{Total: max(1, cum/4)}
	if len(breakpoints) > MaxCacheBreakpoints {
		return u, commit, fmt.Errorf("A maximum of %d blocks with cache_control may be provided. Found %d.", MaxCacheBreakpoints, len(breakpoints))
	}
	if len(breakpoints) == 0 {
		return u, commit, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil {
		c.written = map[[sha256.Size]byte]bool{}
	}
	hit := -1
	for _, bp := range breakpoints {
		for j := bp; j >= 0 && j >= bp-anthropicLookback; j-- {
			if c.written[sums[j]] {
				hit = max(hit, j)
				break
			}
		}
	}
	if hit >= 0 {
		u.Read = tokensAt[hit]
	}
	last := breakpoints[len(breakpoints)-1]
	if last > hit && tokensAt[last] >= minTokens {
		u.Write = tokensAt[last] - u.Read
	}
	commit = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, bp := range breakpoints {
			if tokensAt[bp] >= minTokens {
				c.written[sums[bp]] = true
			}
		}
	}
	return u, commit, nil
}

// anthropicPrefixes hashes each prefix of the prompt (tools, system,
// messages, block by block): the hash and estimated tokens of each, which
// blocks carry cache_control, and the prompt's canonical length.
func anthropicPrefixes(p anthropicPrompt) (sums [][sha256.Size]byte, tokensAt []int64, breakpoints []int, cum int64) {
	h := sha256.New()
	h.Write([]byte(p.Model))
	add := func(block json.RawMessage, marker string) {
		canon, marked := canonicalBlock(block)
		h.Write([]byte(marker))
		h.Write(canon)
		cum += int64(len(canon))
		var sum [sha256.Size]byte
		h.Sum(sum[:0])
		sums = append(sums, sum)
		tokensAt = append(tokensAt, cum/4)
		if marked {
			breakpoints = append(breakpoints, len(sums)-1)
		}
	}
	for _, t := range p.Tools {
		add(t, "\x00tool")
	}
	for _, b := range contentBlocks(p.System) {
		add(b, "\x00system")
	}
	for _, m := range p.Messages {
		for i, b := range contentBlocks(m.Content) {
			marker := "\x00"
			if i == 0 {
				marker = "\x00" + m.Role
			}
			add(b, marker)
		}
	}
	return sums, tokensAt, breakpoints, cum
}

// canonicalBlock is a block's bytes with cache_control removed (a marker
// does not change the prompt) and its keys in a fixed order; marked reports
// whether it carried cache_control.
func canonicalBlock(raw json.RawMessage) (canon []byte, marked bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw, false
	}
	if cc, ok := m["cache_control"]; ok {
		marked = len(cc) > 0 && string(cc) != "null"
		delete(m, "cache_control")
	}
	canon, err := json.Marshal(m)
	if err != nil {
		return raw, marked
	}
	return canon, marked
}

// contentBlocks splits message or system content: a string is one text
// block (which cannot carry cache_control).
func contentBlocks(raw json.RawMessage) []json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{b}
	}
	var bs []json.RawMessage
	if json.Unmarshal(raw, &bs) != nil {
		return []json.RawMessage{raw}
	}
	return bs
}

// openAIPrompt is the part of a Chat Completions request the cache sees.
type openAIPrompt struct {
	Model    string            `json:"model"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []json.RawMessage `json:"messages"`
}

// openAI accounts a valid Chat Completions request; commit stores its
// prompt (call it only when the request is answered).
func (c *promptCache) openAI(body []byte) (u cacheUsage, commit func()) {
	var p openAIPrompt
	if json.Unmarshal(body, &p) != nil {
		return cacheUsage{Total: estimate(len(body))}, func() {}
	}
	var rendered bytes.Buffer
	rendered.WriteString(p.Model)
	for _, t := range p.Tools {
		canon, _ := canonicalBlock(t)
		rendered.WriteString("\x00tool")
		rendered.Write(canon)
	}
	for _, m := range p.Messages {
		canon, _ := canonicalBlock(m)
		rendered.WriteString("\x00msg")
		rendered.Write(canon)
	}
	prompt := rendered.Bytes()
	u = cacheUsage{Total: max(1, int64(len(prompt))/4)}
	c.mu.Lock()
	defer c.mu.Unlock()
	common := 0
	for _, old := range c.prompts {
		n := 0
		for n < len(old) && n < len(prompt) && old[n] == prompt[n] {
			n++
		}
		common = max(common, n)
	}
	if tokens := int64(common) / 4; tokens >= openAICacheMin {
		u.Read = min(tokens/openAICacheStep*openAICacheStep, u.Total)
	}
	return u, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.prompts = append(c.prompts, prompt)
		if len(c.prompts) > openAIPromptsKept {
			c.prompts = c.prompts[1:]
		}
	}
}
