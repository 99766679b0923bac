// Package openai is capstan's OpenAI Chat Completions provider, built on the
// official github.com/openai/openai-go/v3 client.
//
// It implements llm.Model (one streamed turn) and registers itself as the
// "openai" provider, so "openai:gpt-4.1" opened with llm.Open runs in
// capstan's shared tool loop. With a base URL (Config.BaseURL, --base-url or
// OPENAI_BASE_URL) it serves any Chat Completions server: Ollama, vLLM,
// llama.cpp server, LM Studio, OpenRouter; the API key is then optional.
//
//	import _ "github.com/capstan-dev/capstan/llm/openai"
//
// Retries are owned here, not by the SDK (whose own retries are disabled):
// see Config.Retry. A 429 whose code is insufficient_quota is not retried.
package openai

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

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/llm"
)

// Defaults.
const (
	DefaultModel   = "gpt-4.1"
	DefaultBaseURL = "https://api.openai.com/v1/"
	// EnvAPIKey and EnvBaseURL are read through llm.Config.Getenv.
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

func init() {
	llm.RegisterModel("openai", func(ctx context.Context, c llm.Config) (llm.Model, error) {
		return New(FromLLM(c))
	})
}

// Config configures a Model.
type Config struct {
	// APIKey is sent as a bearer token; required unless BaseURL is set
	// (local servers usually need none).
	APIKey string
	// BaseURL of the API including /v1 ("" = DefaultBaseURL).
	BaseURL string
	// Model id ("" = DefaultModel); llm.Request.Model overrides it.
	Model string
	// MaxTokens caps completion tokens per turn (0 = server default).
	MaxTokens int
	// HTTPClient (nil = http.DefaultClient); Timeouts are enforced on top
	// of it.
	HTTPClient *http.Client
	// Timeouts bound connecting, waiting for the response headers and
	// silences in the stream (zero fields = retry's defaults); a request
	// that runs over is retried like a dropped connection.
	Timeouts llm.Timeouts
	// Retry bounds retries of 429 (except insufficient_quota), 5xx and
	// dropped streams.
	Retry llm.RetryPolicy
	// Events receives model.retry events (nil = discard).
	Events event.Emitter
}

// FromLLM builds a Config from the provider config llm.Open passes:
// BaseURL from cfg.BaseURL, else OPENAI_BASE_URL; the key from
// OPENAI_API_KEY, read only through cfg.Getenv.
func FromLLM(c llm.Config) Config {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	base := c.BaseURL
	if base == "" {
		base = getenv(EnvBaseURL)
	}
	return Config{APIKey: getenv(EnvAPIKey), BaseURL: base, Model: c.Model, HTTPClient: c.HTTPClient, Timeouts: c.Timeouts, Retry: c.Retry, Events: c.Events}
}

// Model is an llm.Model speaking OpenAI Chat Completions.
type Model struct {
	cfg Config
	// stream starts one streamed Chat Completions call. It is the client's
	// method value, not the client: a Model is held as an interface, and a
	// client field would make every service of the SDK (and, since the
	// Temporal SDK turns the linker's dead-method elimination off, every
	// exported method of every type they reach) part of the binary.
	stream func(context.Context, sdk.ChatCompletionNewParams, ...option.RequestOption) *ssestream.Stream[sdk.ChatCompletionChunk]

	// schemas remembers converted tool input schemas.
	schemas llm.SchemaCache[shared.FunctionParameters]
}

// New builds a Model. A missing key without a base URL is SDK_AUTH.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.APIKey) == "" && cfg.BaseURL == "" {
		e := agenterr.New(agenterr.CodeSdkAuth, agenterr.LayerSDKBridge, false, "no OpenAI API key: %s is not set", EnvAPIKey)
		e.Hint = "export " + EnvAPIKey + "=sk-...; for a local server (Ollama, vLLM, llama.cpp, LM Studio) set --base-url or " + EnvBaseURL + " instead"
		return nil, e
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	hc := cfg.Timeouts.Client(cfg.HTTPClient)
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey), // overrides a process OPENAI_API_KEY: keys come only from Config
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // capstan owns the retry policy
	}
	if cfg.APIKey == "" {
		opts = append(opts, option.WithHeaderDel("Authorization"))
	}
	opts = append(opts, envHeaderDrops(os.LookupEnv)...)
	client := sdk.NewClient(opts...)
	return &Model{cfg: cfg, stream: client.Chat.Completions.NewStreaming}, nil
}

// envHeaderDrops are the options that drop the headers the SDK's client
// takes from the process environment when it is made
// (sdk.DefaultClientOptions: OPENAI_ORG_ID, OPENAI_PROJECT_ID and the
// "Name: value" lines of OPENAI_CUSTOM_HEADERS), so that a request
// carries only what Config says. Every request applies every option of
// its client, so a header the environment does not set gets no option.
func envHeaderDrops(lookup func(string) (string, bool)) []option.RequestOption {
	var drops []option.RequestOption
	if _, ok := lookup("OPENAI_ORG_ID"); ok {
		drops = append(drops, option.WithHeaderDel("OpenAI-Organization"))
	}
	if _, ok := lookup("OPENAI_PROJECT_ID"); ok {
		drops = append(drops, option.WithHeaderDel("OpenAI-Project"))
	}
	if custom, ok := lookup("OPENAI_CUSTOM_HEADERS"); ok {
		for _, line := range strings.Split(custom, "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) != "" {
				drops = append(drops, option.WithHeaderDel(strings.TrimSpace(name)))
			}
		}
	}
	return drops
}

// Generate implements llm.Model: one streamed turn, retried per
// Config.Retry. A StreamSink in ctx receives the choices[0].delta.content
// fragments as they arrive (refusals and tool-call arguments are not
// streamed); an attempt that fails after streaming text tells the sink
// TextDiscarded before it is retried.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	structured := len(req.OutputSchema) > 0
	sink := llm.StreamSinkFrom(ctx)
	var billed event.Usage // of the failed attempts whose usage the server reported
	unreported := 0        // failed attempts that began to answer and never reported it
	resp, err := llm.Retry(ctx, m.cfg.Retry, m.call(), func(attempt int) (*llm.Response, *llm.RetryFailure) {
		return m.once(ctx, params, structured, attempt, sink, &billed, &unreported)
	})
	return llm.WithBilled(resp, err, billed, unreported)
}

// call describes this provider's API calls for llm.Retry.
func (m *Model) call() llm.RetryCall {
	return llm.RetryCall{Provider: "openai", Events: m.cfg.Events, Hints: retryHints}
}

// retryHints are the hints of a failed call's final error, by code (read
// only: every call shares them).
var retryHints = map[string]string{
	agenterr.CodeSdkAuth:       "check " + EnvAPIKey + " (and " + EnvBaseURL + " if you use a gateway or local server)",
	agenterr.CodeSdkRateLimit:  "the API is rate limiting this key; wait and resume the run, or lower concurrency",
	agenterr.CodeSdkConnection: "the API or the network is failing (is the local server running?); resume the run later",
}

// once runs one streamed attempt, passing text deltas to sink (nil = none).
//
// The usage of the response in flight goes to the context's usage
// observer (llm.WithUsageObserver) as the stream tells it: when the
// first chunk arrives, that the response's usage is not reported yet
// (these servers send it in the stream's last chunk, after the
// finish_reason; some, such as vLLM with continuous usage stats, in
// every chunk), and the usage of every chunk that carries one. A failed
// attempt whose stream had reported its usage adds it to billed; one
// whose stream had begun (the server was answering, so it billed the
// request) and had not reported it counts in unreported.
func (m *Model) once(ctx context.Context, params sdk.ChatCompletionNewParams, structured bool, attempt int, sink llm.StreamSink, billed *event.Usage, unreported *int) (resp *llm.Response, fail *llm.RetryFailure) {
	// The SDK sends X-Stainless-Retry-Count: 0 itself; a retry says
	// which one it is (the SDK's own retries are off).
	var opts []option.RequestOption
	if attempt > 1 {
		opts = append(opts, option.WithHeader("X-Stainless-Retry-Count", strconv.Itoa(attempt-1)))
	}
	stream := m.stream(ctx, params, opts...)
	defer stream.Close()
	streamed := false
	if sink != nil {
		defer func() {
			if fail != nil && streamed {
				sink.TextDiscarded(fail.Message)
			}
		}()
	}
	var acc sdk.ChatCompletionAccumulator
	finished := false
	var cacheWrites int64 // the accumulator drops prompt_tokens_details.cache_write_tokens
	began := false
	var reported event.Usage // the usage the stream last reported
	usageSeen := false
	defer func() {
		switch {
		case fail == nil:
		case usageSeen:
			billed.Add(reported)
		case began:
			*unreported++
		}
	}()
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		cacheWrites += chunk.Usage.PromptTokensDetails.CacheWriteTokens
		if chunk.JSON.Usage.Valid() {
			// What the server bills for the response, whatever becomes
			// of the rest of its stream.
			reported, usageSeen = usage(chunk.Usage), true
			inFlight := *billed
			inFlight.Add(reported)
			llm.ObserveUsage(ctx, inFlight)
		} else if !began {
			llm.ObserveUnreportedUsage(ctx, *billed)
		}
		began = true
		for _, c := range chunk.Choices {
			if c.FinishReason != "" {
				finished = true
			}
			// toResponse answers with choice 0; stream the same text.
			if sink != nil && c.Index == 0 && c.Delta.Content != "" {
				sink.TextDelta(c.Delta.Content)
				streamed = true
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, m.classify(err)
	}
	if !finished {
		return nil, &llm.RetryFailure{Code: agenterr.CodeSdkConnection, Message: "stream ended without a finish_reason (dropped connection)", Retryable: true}
	}
	acc.Usage.PromptTokensDetails.CacheWriteTokens = cacheWrites
	return toResponse(&acc.ChatCompletion, structured), nil
}

func (m *Model) classify(err error) *llm.RetryFailure {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		f := &llm.RetryFailure{Status: apiErr.StatusCode}
		if apiErr.Response != nil {
			f.RetryAfter, f.HasRetryAfter = llm.RetryAfter(apiErr.Response.Header, time.Now())
		}
		s := apiErr.StatusCode
		switch {
		case s == http.StatusTooManyRequests && apiErr.Code == "insufficient_quota":
			f.Code, f.Permanent = agenterr.CodeSdkRateLimit, true
			f.Hint = "the account has no quota left: check billing; retrying will not help"
		case s == http.StatusTooManyRequests:
			f.Code, f.Retryable = agenterr.CodeSdkRateLimit, true
		case s == http.StatusUnauthorized || s == http.StatusForbidden:
			f.Code = agenterr.CodeSdkAuth
		case s >= 500 || s == http.StatusRequestTimeout || s == http.StatusConflict:
			f.Code, f.Retryable = agenterr.CodeSdkConnection, true
		default:
			f.Code = agenterr.CodeSdkRequest
		}
		if apiErr.Response != nil {
			switch apiErr.Response.Header.Get("x-should-retry") {
			case "false":
				f.Retryable = false
			case "true":
				f.Retryable = f.Code != agenterr.CodeSdkRateLimit || apiErr.Code != "insufficient_quota"
			}
		}
		desc := fmt.Sprintf("HTTP %d", s)
		if apiErr.Type != "" {
			desc += " " + apiErr.Type
		}
		if apiErr.Code != "" {
			desc += " (" + apiErr.Code + ")"
		}
		if apiErr.Message != "" {
			desc += ": " + apiErr.Message
		}
		f.Message = m.redact(desc)
		return f
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(se.Event.Data, &body)
		code := fmt.Sprint(body.Error.Code)
		f := &llm.RetryFailure{Code: agenterr.CodeSdkConnection, Retryable: true,
			Message: m.redact("stream error: " + strings.TrimSpace(body.Error.Type+" "+body.Error.Message))}
		switch {
		case code == "insufficient_quota":
			f.Code, f.Retryable, f.Permanent = agenterr.CodeSdkRateLimit, false, true
		case code == "rate_limit_exceeded" || strings.Contains(body.Error.Type, "rate_limit"):
			f.Code = agenterr.CodeSdkRateLimit
		}
		return f
	}
	return &llm.RetryFailure{Code: agenterr.CodeSdkConnection, Message: m.redact("connection failed: " + err.Error()), Retryable: true}
}

func (m *Model) redact(s string) string {
	if k := m.cfg.APIKey; len(k) >= 4 {
		s = strings.ReplaceAll(s, k, "[REDACTED]")
	}
	return s
}

// stopReasons maps finish_reason to capstan's (Anthropic-style) vocabulary.
var stopReasons = map[string]string{"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
	"length": "max_tokens", "content_filter": "refusal"}

// usage splits prompt_tokens, which includes the cached tokens and the
// tokens written to the cache (models with explicit cache writes), into
// capstan's uncached / cache-read / cache-write figures.
func usage(u sdk.CompletionUsage) event.Usage {
	read, write := u.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CacheWriteTokens
	return event.Usage{InputTokens: max(0, u.PromptTokens-read-write), OutputTokens: u.CompletionTokens,
		CacheReadTokens: read, CacheWriteTokens: write}
}

func toResponse(c *sdk.ChatCompletion, structured bool) *llm.Response {
	resp := &llm.Response{Model: c.Model}
	resp.Message.Role = event.RoleAssistant
	resp.Usage = usage(c.Usage)
	if len(c.Choices) == 0 {
		resp.StopReason = "end_turn"
		return resp
	}
	ch := c.Choices[0]
	resp.StopReason = string(ch.FinishReason)
	if r, ok := stopReasons[resp.StopReason]; ok {
		resp.StopReason = r
	}
	resp.Message.Text = ch.Message.Content
	if ch.Message.Refusal != "" {
		resp.Message.Text = ch.Message.Refusal
		resp.StopReason = "refusal"
	}
	for _, tc := range ch.Message.ToolCalls {
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, event.ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: toolInput(tc.Function.Arguments)})
	}
	if structured && len(resp.Message.ToolCalls) == 0 && ch.Message.Refusal == "" {
		if s := strings.TrimSpace(ch.Message.Content); s != "" && json.Valid([]byte(s)) {
			resp.StructuredOutput = json.RawMessage(s)
		}
	}
	return resp
}

func (m *Model) params(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = m.cfg.Model
	}
	p := sdk.ChatCompletionNewParams{Model: shared.ChatModel(model),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.cfg.MaxTokens
	}
	if maxTokens > 0 {
		p.MaxCompletionTokens = sdk.Int(int64(maxTokens))
	}
	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	if req.Seed != nil {
		p.Seed = sdk.Int(*req.Seed)
	}
	for _, spec := range req.Tools {
		params, err := m.schemas.Get(spec.InputSchema, parameters)
		if err != nil {
			return p, agenterr.Wrap(err, agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "tool %s has an invalid input schema", spec.Name)
		}
		fn := shared.FunctionDefinitionParam{Name: spec.Name, Parameters: params}
		if spec.Description != "" {
			fn.Description = sdk.String(spec.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if len(req.OutputSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(req.OutputSchema, &schema); err != nil {
			return p, agenterr.Wrap(err, agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "output schema is not a JSON object")
		}
		name := schemaName(req.OutputSchemaName)
		p.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: name, Strict: sdk.Bool(true), Schema: schema}}}
	}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case event.RoleUser, event.RoleTool:
			for _, r := range msg.ToolResults {
				content := r.Content
				if r.IsError && !strings.HasPrefix(content, "Error") {
					content = "Error: " + content
				}
				p.Messages = append(p.Messages, sdk.ToolMessage(content, r.CallID))
			}
			if msg.Text != "" {
				p.Messages = append(p.Messages, sdk.UserMessage(msg.Text))
			}
		case event.RoleAssistant:
			if msg.Text == "" && len(msg.ToolCalls) == 0 {
				continue
			}
			a := sdk.ChatCompletionAssistantMessageParam{}
			if msg.Text != "" {
				a.Content.OfString = sdk.String(msg.Text)
			}
			for _, c := range msg.ToolCalls {
				args := string(c.Input)
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args}}})
			}
			p.Messages = append(p.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return p, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "transcript has a message with unknown role %q", msg.Role)
		}
	}
	return p, nil
}

// parameters converts a tool's JSON Schema to function parameters.
func parameters(raw json.RawMessage) (shared.FunctionParameters, error) {
	var params shared.FunctionParameters
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &params); err != nil {
			return nil, err
		}
	}
	if params == nil {
		params = shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	}
	return params, nil
}

// schemaName makes a response_format name: [a-zA-Z0-9_-], at most 64.
func schemaName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "output"
	}
	return b.String()
}

// toolInput turns a model's arguments string into the call's input
// (llm.ToolInput: arguments that are not JSON become a JSON string).
func toolInput(args string) json.RawMessage { return llm.ToolInput(json.RawMessage(args)) }
