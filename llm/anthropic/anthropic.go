// Package anthropic is capstan's Anthropic Messages API provider, built on
// the official github.com/anthropics/anthropic-sdk-go client.
//
// It implements llm.Model (one streamed API turn) and registers itself as
// the "anthropic" provider, so "anthropic:claude-sonnet-5" opened with
// llm.Open runs in capstan's shared tool loop with the built-in tools.
//
// Importing the package for its side effect is enough:
//
//	import _ "github.com/capstan-dev/capstan/llm/anthropic"
//
// Every request is marked for prompt caching with rolling breakpoints: on
// the tool definitions, the system prompt, the newest message and the
// newest message of the previous turn, so each request reads everything the
// previous one sent from the cache and pays the full rate only for what is
// new (see Model.params). Retries are owned here, not by
// the SDK (whose own retries are disabled): see Config.Retry.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/llm"
)

// Defaults.
const (
	DefaultModel     = "claude-sonnet-5"
	DefaultBaseURL   = "https://api.anthropic.com/"
	DefaultMaxTokens = 8192
	// EnvAPIKey and EnvBaseURL are read through llm.Config.Getenv.
	EnvAPIKey    = "ANTHROPIC_API_KEY"
	EnvAuthToken = "ANTHROPIC_AUTH_TOKEN"
	EnvBaseURL   = "ANTHROPIC_BASE_URL"
)

func init() {
	llm.RegisterModel("anthropic", func(ctx context.Context, c llm.Config) (llm.Model, error) {
		return New(FromLLM(c))
	})
}

// Config configures a Model.
type Config struct {
	// APIKey is sent as x-api-key. One of APIKey and AuthToken is
	// required.
	APIKey string
	// AuthToken is sent as "Authorization: Bearer" (LLM gateways) when
	// APIKey is empty.
	AuthToken string
	// BaseURL of the API ("" = DefaultBaseURL).
	BaseURL string
	// Model id ("" = DefaultModel); llm.Request.Model overrides it.
	Model string
	// MaxTokens per turn when the request does not set one (0 =
	// DefaultMaxTokens).
	MaxTokens int
	// HTTPClient (nil = http.DefaultClient); Timeouts are enforced on top
	// of it.
	HTTPClient *http.Client
	// Timeouts bound connecting, waiting for the response headers and
	// silences in the stream (zero fields = retry's defaults); a request
	// that runs over is retried like a dropped connection.
	Timeouts llm.Timeouts
	// Retry bounds retries of 429, 529, 5xx and dropped streams.
	Retry llm.RetryPolicy
	// DisablePromptCache drops the cache_control markers.
	DisablePromptCache bool
	// Events receives model.retry events (nil = discard).
	Events event.Emitter
}

// FromLLM builds a Config from the provider config llm.Open passes:
// BaseURL from cfg.BaseURL, else ANTHROPIC_BASE_URL; the key from
// ANTHROPIC_API_KEY, read only through cfg.Getenv.
func FromLLM(c llm.Config) Config {
	getenv := c.Getenv
	if getenv == nil {
		getenv = envGetter()
	}
	base := c.BaseURL
	if base == "" {
		base = getenv(EnvBaseURL)
	}
	return Config{APIKey: getenv(EnvAPIKey), AuthToken: getenv(EnvAuthToken), BaseURL: base, Model: c.Model, HTTPClient: c.HTTPClient, Timeouts: c.Timeouts, Retry: c.Retry, Events: c.Events}
}

// Model is an llm.Model speaking the Anthropic Messages API.
type Model struct {
	cfg Config
	// stream starts one streamed Messages call. It is the client's method
	// value, not the client: a Model is held as an interface, and a client
	// field would make every service of the SDK (and, since the Temporal SDK
	// turns the linker's dead-method elimination off, every exported method
	// of every type they reach) part of the binary.
	stream func(context.Context, sdk.MessageNewParams, ...option.RequestOption) *ssestream.Stream[sdk.MessageStreamEventUnion]

	// schemas remembers converted tool input schemas.
	schemas llm.SchemaCache[sdk.ToolInputSchemaParam]
	// limits are the limits of cfg.Model, looked up once: a request for
	// it (nearly every one) does not normalize its name again.
	limits llm.ModelLimits
}

// New builds a Model. A missing API key is an SDK_AUTH error.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.APIKey) == "" && strings.TrimSpace(cfg.AuthToken) == "" {
		e := agenterr.New(agenterr.CodeSdkAuth, agenterr.LayerSDKBridge, false, "no Anthropic API key: %s is not set", EnvAPIKey)
		e.Hint = "export " + EnvAPIKey + "=sk-ant-... (or " + EnvAuthToken + " for a gateway, or pick another provider with --model)"
		return nil, e
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	hc := cfg.Timeouts.Client(cfg.HTTPClient)
	auth := option.WithAPIKey(cfg.APIKey)
	if cfg.APIKey == "" {
		auth = option.WithAuthToken(cfg.AuthToken)
	}
	client := sdk.NewClient(
		option.WithoutEnvironmentDefaults(), // never read keys or URLs from the process env behind Config's back
		option.WithBaseURL(cfg.BaseURL),
		auth,
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // capstan owns the retry policy
	)
	limits, _ := llm.ModelLimitsOf(cfg.Model)
	return &Model{cfg: cfg, stream: client.Messages.NewStreaming, limits: limits}, nil
}

// Generate implements llm.Model: one streamed turn, retried per
// Config.Retry. A StreamSink in ctx receives the text_delta events of text
// blocks as they arrive (thinking is not streamed); an attempt that fails
// after streaming text tells the sink TextDiscarded before it is retried.
//
// An attempt that fails after message_start was billed for what that
// event and the stream reported: its usage is added to the usage of the
// response that follows, or, when every attempt fails, carried by the
// error (llm.BilledError).
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	sink := llm.StreamSinkFrom(ctx)
	var billed event.Usage // of the failed attempts
	resp, err := llm.Retry(ctx, m.cfg.Retry, m.call(), func(attempt int) (*llm.Response, *llm.RetryFailure) {
		return m.once(ctx, params, attempt, sink, &billed)
	})
	return llm.WithBilled(resp, err, billed, 0) // message_start reports the usage of every attempt that began
}

// call describes this provider's API calls for llm.Retry.
func (m *Model) call() llm.RetryCall {
	return llm.RetryCall{Provider: "anthropic", Events: m.cfg.Events, Hints: retryHints}
}

// retryHints are the hints of a failed call's final error, by code (read
// only: every call shares them).
var retryHints = map[string]string{
	agenterr.CodeSdkAuth:       "check " + EnvAPIKey + " (and " + EnvBaseURL + " if you use a gateway)",
	agenterr.CodeSdkRateLimit:  "the API is rate limiting this key; wait and resume the run, or lower concurrency",
	agenterr.CodeSdkConnection: "the API or the network is failing; resume the run later",
}

// once runs one streamed attempt, passing text deltas to sink (nil = none).
// A failed attempt adds the usage its stream reported to billed.
func (m *Model) once(ctx context.Context, params sdk.MessageNewParams, attempt int, sink llm.StreamSink, billed *event.Usage) (resp *llm.Response, fail *llm.RetryFailure) {
	// The SDK sends X-Stainless-Retry-Count: 0 itself; a retry says
	// which one it is (the SDK's own retries are off).
	var opts []option.RequestOption
	if attempt > 1 {
		opts = append(opts, option.WithHeader("X-Stainless-Retry-Count", strconv.Itoa(attempt-1)))
	}
	stream := m.stream(ctx, params, opts...)
	defer stream.Close()
	streamed := false
	var acc sdk.Message
	defer func() {
		if fail == nil {
			return
		}
		billed.Add(usageOf(&acc.Usage))
		if sink != nil && streamed {
			sink.TextDiscarded(fail.Message)
		}
	}()
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			return nil, &llm.RetryFailure{Code: agenterr.CodeSdkConnection, Message: "malformed stream: " + m.redact(err.Error()), Retryable: true}
		}
		switch ev.Type {
		case "message_start":
			// The response is billed from here on, whatever becomes of
			// its stream.
			inFlight := *billed
			inFlight.Add(usageOf(&acc.Usage))
			llm.ObserveUsage(ctx, inFlight)
		case "message_stop":
			stopped = true
		case "content_block_delta":
			if sink != nil && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
				sink.TextDelta(ev.Delta.Text)
				streamed = true
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, m.classify(err)
	}
	if !stopped {
		return nil, &llm.RetryFailure{Code: agenterr.CodeSdkConnection, Message: "stream ended before message_stop (dropped connection)", Retryable: true}
	}
	return toResponse(&acc, len(params.OutputConfig.Format.Schema) > 0), nil
}

// classify maps an SDK or transport error to a failure. Messages are built
// from the status and the API's error body only, never from the request,
// and any occurrence of the key is redacted.
func (m *Model) classify(err error) *llm.RetryFailure {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		typ, msg := apiErrorBody(apiErr.RawJSON())
		if typ == "" {
			typ = string(apiErr.Type())
		}
		f := &llm.RetryFailure{Status: apiErr.StatusCode}
		if apiErr.Response != nil {
			f.RetryAfter, f.HasRetryAfter = llm.RetryAfter(apiErr.Response.Header, time.Now())
		}
		status := apiErr.StatusCode
		if status == http.StatusOK { // an error event inside a 200 stream
			status = statusOfType(typ)
			f.Status = 0
		}
		switch {
		case status == http.StatusTooManyRequests:
			f.Code, f.Retryable = agenterr.CodeSdkRateLimit, true
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			f.Code = agenterr.CodeSdkAuth
		case status == 529 || status >= 500 || status == http.StatusRequestTimeout || status == http.StatusConflict:
			f.Code, f.Retryable = agenterr.CodeSdkConnection, true
		default:
			f.Code = agenterr.CodeSdkRequest
		}
		if apiErr.Response != nil {
			switch apiErr.Response.Header.Get("x-should-retry") {
			case "false":
				f.Retryable = false
			case "true":
				f.Retryable = true
			}
		}
		desc := fmt.Sprintf("HTTP %d", apiErr.StatusCode)
		if apiErr.StatusCode == http.StatusOK {
			desc = "stream error event"
		}
		if typ != "" {
			desc += " " + typ
		}
		if msg != "" {
			desc += ": " + msg
		}
		if apiErr.RequestID != "" {
			desc += " (request " + apiErr.RequestID + ")"
		}
		f.Message = m.redact(desc)
		return f
	}
	return &llm.RetryFailure{Code: agenterr.CodeSdkConnection, Message: m.redact("connection failed: " + err.Error()), Retryable: true}
}

func (m *Model) redact(s string) string {
	for _, k := range []string{m.cfg.APIKey, m.cfg.AuthToken} {
		if len(k) >= 4 {
			s = strings.ReplaceAll(s, k, "[REDACTED]")
		}
	}
	return s
}

func statusOfType(typ string) int {
	switch typ {
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	case "api_error":
		return http.StatusInternalServerError
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error", "billing_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

func apiErrorBody(raw string) (typ, msg string) {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) == nil {
		return body.Error.Type, body.Error.Message
	}
	return "", ""
}

// usageOf converts the API's usage.
func usageOf(u *sdk.Usage) event.Usage {
	return event.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
}

func toResponse(msg *sdk.Message, structured bool) *llm.Response {
	resp := &llm.Response{StopReason: string(msg.StopReason), Model: string(msg.Model), Usage: usageOf(&msg.Usage)}
	resp.Message.Role = event.RoleAssistant
	var text strings.Builder
	var reasoning []reasoningBlock
	firstText := ""
	seenText := false
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			if !seenText {
				firstText, seenText = b.Text, true
			}
			text.WriteString(b.Text)
		case "tool_use":
			in := b.Input
			if len(in) == 0 {
				in = json.RawMessage(`{}`)
			}
			resp.Message.ToolCalls = append(resp.Message.ToolCalls, event.ToolCall{ID: b.ID, Name: b.Name, Input: append(json.RawMessage(nil), in...)})
		case "thinking":
			reasoning = append(reasoning, reasoningBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			reasoning = append(reasoning, reasoningBlock{Type: b.Type, Data: b.Data})
		}
	}
	if len(reasoning) > 0 {
		resp.Message.Reasoning, _ = json.Marshal(reasoning)
	}
	resp.Message.Text = text.String()
	if structured && len(resp.Message.ToolCalls) == 0 && seenText && resp.StopReason != "refusal" {
		if s := strings.TrimSpace(firstText); json.Valid([]byte(s)) {
			resp.StructuredOutput = json.RawMessage(s)
		}
	}
	return resp
}

// params maps an llm.Request to the Messages API.
//
// Prompt caching: the API caches the prompt prefix up to each block marked
// cache_control (at most four per request) and a later request reads the
// longest prefix an earlier one wrote, checking each marker and the 20
// blocks before it. params marks the last tool definition and the system
// prompt (stable for the whole run), the last block of the newest message
// (written now, read by the next turn) and the last block of the newest
// message of the previous turn (read now, even when this turn added more
// than 20 blocks). A marker whose prefix is shorter than the model's
// minimum cacheable length would be ignored by the API, so it is left out.
func (m *Model) params(req *llm.Request) (sdk.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = m.cfg.Model
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.cfg.MaxTokens
	}
	limits := m.limits
	if model != m.cfg.Model {
		limits, _ = llm.ModelLimitsOf(model)
	}
	cacheable := func(prefixBytes int) bool {
		return !m.cfg.DisablePromptCache && llm.EstimateTokens(prefixBytes) >= limits.MinCacheable
	}
	p := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: int64(maxTokens)}
	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	prefix := 0 // bytes of the prompt so far, to weigh markers against the minimum
	for i, spec := range req.Tools {
		schema, err := m.schemas.Get(spec.InputSchema, inputSchema)
		if err != nil {
			return p, agenterr.Wrap(err, agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "tool %s has an invalid input schema", spec.Name)
		}
		prefix += llm.SpecSize(spec)
		t := sdk.ToolParam{Name: spec.Name, InputSchema: schema}
		if spec.Description != "" {
			t.Description = sdk.String(spec.Description)
		}
		if i == len(req.Tools)-1 && cacheable(prefix) {
			t.CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &t})
	}
	if req.System != "" {
		prefix += len(req.System)
		sys := sdk.TextBlockParam{Text: req.System}
		if cacheable(prefix) {
			sys.CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		p.System = []sdk.TextBlockParam{sys}
	}
	if len(req.OutputSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(req.OutputSchema, &schema); err != nil {
			return p, agenterr.Wrap(err, agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "output schema is not a JSON object")
		}
		p.OutputConfig = sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: schema}}
	}
	msgs, sizes, err := wireMessages(req.Messages)
	if err != nil {
		return p, err
	}
	// Prefix bytes up to the end of each wire message.
	for i := range sizes {
		prefix += sizes[i]
		sizes[i] = prefix
	}
	// The newest message, and the newest message of the previous turn
	// (user messages alternate with assistant ones, so two back).
	for _, i := range []int{len(msgs) - 3, len(msgs) - 1} {
		if i >= 0 && cacheable(sizes[i]) {
			markLastBlock(msgs[i])
		}
	}
	p.Messages = msgs
	return p, nil
}

// markLastBlock puts a cache marker on the last block of msg that can
// carry one (thinking blocks cannot).
func markLastBlock(msg sdk.MessageParam) {
	for j := len(msg.Content) - 1; j >= 0; j-- {
		if cc := msg.Content[j].GetCacheControl(); cc != nil {
			*cc = sdk.NewCacheControlEphemeralParam()
			return
		}
	}
}

// inputSchema converts a tool's JSON Schema to the SDK's parameter.
func inputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	var s sdk.ToolInputSchemaParam
	if len(raw) == 0 {
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, err
	}
	if t, ok := m["type"]; ok && t != "object" {
		return s, fmt.Errorf("input schema type must be object, got %v", t)
	}
	s.Properties = m["properties"]
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		switch k {
		case "type", "properties", "required":
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

// wireMessages maps the transcript to alternating user/assistant messages:
// tool results become tool_result blocks of a user message, and adjacent
// messages of the same wire role are merged (tool results first), so a
// transcript that stopped after tool results and continues with a new
// prompt is still a valid request. sizes[i] is the content size in bytes
// of out[i] (event.Message.Size of the messages it holds).
func wireMessages(msgs []event.Message) (out []sdk.MessageParam, sizes []int, err error) {
	out = make([]sdk.MessageParam, 0, len(msgs))
	sizes = make([]int, 0, len(msgs))
	size := 0
	push := func(role sdk.MessageParamRole, blocks []sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			sizes[n-1] += size
			return
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
		sizes = append(sizes, size)
	}
	for _, msg := range msgs {
		size = msg.Size()
		switch msg.Role {
		case event.RoleUser:
			var bs []sdk.ContentBlockParamUnion
			for _, r := range msg.ToolResults {
				bs = append(bs, sdk.NewToolResultBlock(r.CallID, r.Content, r.IsError))
			}
			if msg.Text != "" {
				bs = append(bs, sdk.NewTextBlock(msg.Text))
			}
			push(sdk.MessageParamRoleUser, bs)
		case event.RoleTool:
			var bs []sdk.ContentBlockParamUnion
			for _, r := range msg.ToolResults {
				bs = append(bs, sdk.NewToolResultBlock(r.CallID, r.Content, r.IsError))
			}
			push(sdk.MessageParamRoleUser, bs)
		case event.RoleAssistant:
			// Thinking blocks go back first and verbatim: the API rejects
			// a tool-use continuation whose thinking was dropped.
			bs := reasoningParams(msg.Reasoning)
			if msg.Text != "" {
				bs = append(bs, sdk.NewTextBlock(msg.Text))
			}
			for _, c := range msg.ToolCalls {
				in := c.Input
				if len(in) == 0 {
					in = json.RawMessage(`{}`)
				}
				bs = append(bs, sdk.NewToolUseBlock(c.ID, in, c.Name))
			}
			push(sdk.MessageParamRoleAssistant, bs)
		default:
			return nil, nil, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "transcript has a message with unknown role %q", msg.Role)
		}
	}
	if len(out) == 0 || out[0].Role != sdk.MessageParamRoleUser {
		return nil, nil, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "transcript must start with a user message")
	}
	return out, sizes, nil
}

// envGetter is the process environment, used when llm.Config.Getenv is nil
// (its documented default).
func envGetter() func(string) string { return os.Getenv }

// reasoningBlock is one thinking or redacted_thinking block as kept in
// event.Message.Reasoning.
type reasoningBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// reasoningParams rebuilds the thinking blocks of an assistant message.
// Reasoning that is not ours (another provider's, or corrupt) is ignored.
func reasoningParams(raw json.RawMessage) []sdk.ContentBlockParamUnion {
	if len(raw) == 0 {
		return nil
	}
	var rs []reasoningBlock
	if json.Unmarshal(raw, &rs) != nil {
		return nil
	}
	var out []sdk.ContentBlockParamUnion
	for _, r := range rs {
		switch {
		case r.Type == "thinking" && r.Signature != "":
			out = append(out, sdk.NewThinkingBlock(r.Signature, r.Thinking))
		case r.Type == "redacted_thinking" && r.Data != "":
			out = append(out, sdk.NewRedactedThinkingBlock(r.Data))
		}
	}
	return out
}
