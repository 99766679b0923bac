// Package fakellm serves the Anthropic Messages API and the OpenAI Chat
// Completions API on loopback, speaking their real wire formats (JSON and
// SSE streaming), so that capstan's providers can be tested with the
// official client libraries and no network or API key.
//
// A Server answers each request with a Reply taken from a queue, computed by
// a function of the decoded request, or produced by the stateless benchmark
// mode (a tool call while the request holds fewer than K tool results, then
// a final text). Replies can inject faults: an HTTP error status with
// retry-after headers, a delay before the first byte, an SSE error event or
// a connection cut after N stream events. Every request is validated against
// the invariants the real APIs enforce (a fake that accepts invalid requests
// hides bridge bugs) and recorded, with credentials redacted, for
// assertions.
//
// Beside the servers, the package holds the other fakes of a model for
// tests: Replay, an llm.Model that answers with given responses;
// SinkRecorder, which records what an llm.StreamSink is told; and the
// streaming checks every provider passes against a Server
// (CheckToolTurn, CheckCutThenRetry).
package fakellm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/backoff"
)

// Dialect selects the wire format a Server speaks.
type Dialect string

// The two dialects.
const (
	Anthropic Dialect = "anthropic"
	OpenAI    Dialect = "openai"
)

// ToolCall is a tool call the fake model makes.
type ToolCall struct {
	ID    string          // "" = generated
	Name  string          // tool name
	Input json.RawMessage // JSON object; nil = {}
}

// Usage is the token usage a reply reports. When all three input fields
// are zero they are computed from the request (about four bytes per token)
// with the prompt-cache accounting of the dialect: Anthropic cache_control
// breakpoints, OpenAI automatic prefix caching. InputTokens is the input
// billed at the full rate (Anthropic input_tokens; OpenAI prompt_tokens
// minus cached_tokens).
type Usage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
}

// Fault makes a reply fail instead of (or part way through) answering.
type Fault struct {
	// Status, when non-zero, answers with this HTTP status and the
	// dialect's error body instead of a completion (429, 529, 500, 401...).
	Status int
	// Type is the error type in the body ("" = the dialect's type for
	// Status, e.g. rate_limit_error / overloaded_error for Anthropic).
	Type string
	// Code is OpenAI's error code ("rate_limit_exceeded",
	// "insufficient_quota"); ignored by the Anthropic dialect.
	Code string
	// Message is the error message ("" = a default for Status).
	Message string
	// RetryAfter and RetryAfterMs set the retry-after and retry-after-ms
	// response headers when non-empty.
	RetryAfter   string
	RetryAfterMs string
	// CutAfter, when > 0, closes the connection abruptly after that many
	// stream events (a dropped stream); for non-streaming requests the body
	// is cut after the first half.
	CutAfter int
	// ErrorEventAfter, when > 0, sends an SSE error event (of Type, default
	// overloaded_error) after that many stream events and ends the stream.
	ErrorEventAfter int
	// MalformedAfter, when > 0, sends a data line that is not JSON after
	// that many stream events and ends the stream.
	MalformedAfter int
	// StallAfter, when > 0, stops sending after that many stream events
	// and holds the connection open, silent, until the client gives up (a
	// server that stalls mid-stream; in the OpenAI dialect, StallAfter
	// equal to the number of chunks stalls after the last one, the usage
	// chunk, before "data: [DONE]"). A server that stalls before the
	// response headers is Reply.Delay.
	StallAfter int
}

// Reply is one scripted model answer.
type Reply struct {
	// Text is the assistant text ("" = none).
	Text string
	// ToolCalls are tool calls after the text.
	ToolCalls []ToolCall
	// Thinking, when set, starts an Anthropic reply with a thinking block
	// (with a signature). The fake then requires that block to come back
	// first and unchanged in the assistant message that carries the reply's
	// tool calls, as the real API does; the OpenAI dialect ignores it.
	Thinking string
	// Structured is a structured-output answer: the JSON is sent as the
	// text of the first text block (Anthropic output_config.format) or as
	// message.content (OpenAI response_format json_schema).
	Structured json.RawMessage
	// ChunkSize, when > 0, streams the text in fragments of at most this
	// many bytes (cut on rune boundaries); 0 streams it in two halves.
	ChunkSize int
	// StopReason overrides the stop reason ("" = tool_use/tool_calls when
	// there are tool calls, else end_turn/stop).
	StopReason string
	// Usage overrides the estimated usage.
	Usage Usage
	// Delay waits before the first byte (cancelled with the request).
	Delay time.Duration
	// EventDelay waits before each stream event after the first (a slow
	// stream; cancelled with the request).
	EventDelay time.Duration
	// Fault, when set, makes the reply fail.
	Fault *Fault
}

// Request is a decoded request as the reply function sees it.
type Request struct {
	Dialect Dialect
	Model   string
	Stream  bool
	// System is the system prompt text.
	System string
	// LastUserText is the text of the last user message (tool results
	// excluded).
	LastUserText string
	// ToolResults counts tool_result blocks (Anthropic) or "tool" messages
	// (OpenAI) in the whole request.
	ToolResults int
	// LastToolResults are the contents of the tool results in the last
	// message(s) of the request.
	LastToolResults []string
	// Tools are the names of the offered tools.
	Tools []string
	// Messages is the number of messages (OpenAI: excluding system).
	Messages int
	// HasOutputSchema reports a structured-output request.
	HasOutputSchema bool
	// Body is the raw request body.
	Body json.RawMessage
}

// Recorded is one request as received, for assertions. Credentials in
// headers are replaced by "REDACTED".
type Recorded struct {
	Method string
	Path   string
	Header http.Header
	Body   json.RawMessage
	// Request is the decoded request (zero for invalid ones).
	Request Request
	// Status is the HTTP status the fake answered with.
	Status int
}

// Options configure a Server.
type Options struct {
	// Replies are consumed in order, one per completion request.
	Replies []Reply
	// Respond, when set, computes the reply from the request; it takes
	// precedence over Replies.
	Respond func(Request) Reply
	// Stateless, when > 0, replies with a call of StatelessTool while the
	// request holds fewer than Stateless tool results, then with the final
	// text "done". It takes precedence over Respond and Replies.
	Stateless int
	// StatelessTool is the tool the stateless mode calls ("" = the first
	// offered tool).
	StatelessTool string
	// Delay is added before every reply.
	Delay time.Duration
	// APIKey, when set, is the key a request must carry (x-api-key or
	// Authorization: Bearer); a mismatch is a 401.
	APIKey string
	// InMemory serves over in-process pipes instead of a loopback socket,
	// so tens of thousands of concurrent requests need no file
	// descriptors. Use Server.Client() to reach it.
	InMemory bool
	// NoRecord disables request recording (long benchmarks).
	NoRecord bool
	// CacheMinTokens overrides the minimum cacheable prefix of Anthropic
	// prompt caching (0 = the model's published minimum, llm.ModelLimitsOf).
	CacheMinTokens int64
	// ContextWindow, when > 0, is the model's context window in tokens: a
	// request whose input is larger is answered with the dialect's 400
	// ("prompt is too long" / context_length_exceeded), as the real APIs
	// do.
	ContextWindow int64
}

// Server is a running fake API.
type Server struct {
	// URL is the base URL to give the client (no /v1 suffix for Anthropic;
	// with /v1 for OpenAI, as the official clients expect).
	URL     string
	dialect Dialect
	opts    Options
	srv     *httptest.Server
	mem     *pipeListener
	memSrv  *http.Server

	mu       sync.Mutex
	thinking map[string]string // tool_use id → signature of its thinking block
	cache    promptCache
	next     int
	requests []Recorded
	seq      int
}

// NewAnthropic starts a fake Anthropic Messages API and stops it when tb's
// test ends.
func NewAnthropic(tb testing.TB, opts Options) *Server {
	s := Start(Anthropic, opts)
	tb.Cleanup(s.Close)
	return s
}

// NewOpenAI starts a fake OpenAI Chat Completions API and stops it when tb's
// test ends.
func NewOpenAI(tb testing.TB, opts Options) *Server {
	s := Start(OpenAI, opts)
	tb.Cleanup(s.Close)
	return s
}

// Start starts a fake API of the given dialect; call Close when done.
func Start(d Dialect, opts Options) *Server {
	s := &Server{dialect: d, opts: opts}
	h := http.HandlerFunc(s.serve)
	base := ""
	if opts.InMemory {
		s.mem = newPipeListener()
		s.memSrv = &http.Server{Handler: h}
		go func() { _ = s.memSrv.Serve(s.mem) }()
		base = "http://fakellm.invalid"
	} else {
		s.srv = httptest.NewServer(h)
		base = s.srv.URL
	}
	s.URL = base
	if d == OpenAI {
		s.URL = base + "/v1"
	}
	return s
}

// Client returns an HTTP client that reaches the server (required for
// InMemory servers).
func (s *Server) Client() *http.Client {
	if s.mem != nil {
		return &http.Client{Transport: &http.Transport{
			DialContext:         s.mem.dial,
			MaxIdleConnsPerHost: 1 << 16,
		}}
	}
	return s.srv.Client()
}

// Close stops the server and closes its connections.
func (s *Server) Close() {
	if s.mem != nil {
		_ = s.memSrv.Close()
		return
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns the recorded requests, oldest first.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.requests...)
}

// Remaining is the number of queued replies not yet used.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.opts.Replies) - s.next
}

func (s *Server) record(r *http.Request, body []byte, req Request, status int) {
	if s.opts.NoRecord {
		return
	}
	h := r.Header.Clone()
	for _, k := range []string{"X-Api-Key", "Authorization", "Api-Key"} {
		if h.Get(k) != "" {
			h.Set(k, "REDACTED")
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, Recorded{Method: r.Method, Path: r.URL.Path, Header: h,
		Body: append(json.RawMessage(nil), body...), Request: req, Status: status})
	s.mu.Unlock()
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s%04d", prefix, s.seq)
}

// reply picks the reply for a valid request.
func (s *Server) reply(req Request) (Reply, error) {
	switch {
	case s.opts.Stateless > 0:
		if req.ToolResults < s.opts.Stateless {
			name := s.opts.StatelessTool
			if name == "" && len(req.Tools) > 0 {
				name = req.Tools[0]
			}
			if name == "" {
				return Reply{}, fmt.Errorf("fakellm: stateless mode needs a tool but the request offers none")
			}
			return Reply{ToolCalls: []ToolCall{{Name: name, Input: json.RawMessage(`{}`)}}}, nil
		}
		return Reply{Text: "done"}, nil
	case s.opts.Respond != nil:
		return s.respond(req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.opts.Replies) {
		return Reply{}, fmt.Errorf("fakellm: no scripted reply left (the script had %d)", len(s.opts.Replies))
	}
	r := s.opts.Replies[s.next]
	s.next++
	return r, nil
}

// respond calls the reply function; a panic in it becomes an error reply
// instead of a dropped connection the client would retry.
func (s *Server) respond(req Request) (rp Reply, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fakellm: reply function panicked: %v", r)
		}
	}()
	return s.opts.Respond(req), nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		s.fail(w, r, body, Request{}, http.StatusBadRequest, "", "", "cannot read body: "+err.Error())
		return
	}
	switch s.dialect {
	case Anthropic:
		s.serveAnthropic(w, r, body)
	case OpenAI:
		s.serveOpenAI(w, r, body)
	}
}

// fail writes the dialect's error body.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, body []byte, req Request, status int, typ, code, msg string) {
	s.record(r, body, req, status)
	writeError(w, s.dialect, status, typ, code, msg, s.nextID("req_"))
}

func writeError(w http.ResponseWriter, d Dialect, status int, typ, code, msg, reqID string) {
	w.Header().Set("content-type", "application/json")
	if typ == "" {
		typ = defaultErrorType(d, status)
	}
	if msg == "" {
		msg = http.StatusText(status)
		if status == 529 {
			msg = "Overloaded"
		}
	}
	var b []byte
	if d == Anthropic {
		w.Header().Set("request-id", reqID)
		b, _ = json.Marshal(map[string]any{"type": "error",
			"error": map[string]string{"type": typ, "message": msg}, "request_id": reqID})
	} else {
		var c any
		if code != "" {
			c = code
		}
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func defaultErrorType(d Dialect, status int) string {
	if d == OpenAI {
		switch {
		case status == 401:
			return "invalid_request_error"
		case status == 429:
			return "requests"
		case status >= 500:
			return "server_error"
		}
		return "invalid_request_error"
	}
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// wait sleeps d unless the request is cancelled first; it reports whether
// the request is still alive.
func wait(ctx context.Context, d time.Duration) bool {
	return backoff.Sleep(ctx, d) == nil
}

// applyFault writes an HTTP error fault; it reports whether it did.
func (s *Server) applyFault(w http.ResponseWriter, r *http.Request, body []byte, req Request, f *Fault) bool {
	if f == nil || f.Status == 0 {
		return false
	}
	if f.RetryAfter != "" {
		w.Header().Set("retry-after", f.RetryAfter)
	}
	if f.RetryAfterMs != "" {
		w.Header().Set("retry-after-ms", f.RetryAfterMs)
	}
	if f.Status == http.StatusTooManyRequests && s.dialect == Anthropic {
		w.Header().Set("anthropic-ratelimit-requests-remaining", "0")
	}
	s.fail(w, r, body, req, f.Status, f.Type, f.Code, f.Message)
	return true
}

// sse writes server-sent events, counting them for cut and error faults.
type sse struct {
	ctx     context.Context
	delay   time.Duration
	w       http.ResponseWriter
	f       http.Flusher
	n       int
	fault   *Fault
	dialect Dialect
}

// errAborted reports that a fault ended the stream.
var errAborted = fmt.Errorf("fakellm: stream aborted by fault")

func (e *sse) event(name string, data any) error {
	if e.n > 0 && !wait(e.ctx, e.delay) {
		return errAborted
	}
	if e.fault != nil && e.fault.StallAfter > 0 && e.n >= e.fault.StallAfter {
		e.f.Flush()
		<-e.ctx.Done()
		return errAborted
	}
	if e.fault != nil && e.fault.CutAfter > 0 && e.n >= e.fault.CutAfter {
		e.f.Flush()
		// Abort the handler: the server closes the connection without
		// terminating the chunked body, which the client sees as a dropped
		// stream.
		panic(http.ErrAbortHandler)
	}
	if e.fault != nil && e.fault.ErrorEventAfter > 0 && e.n >= e.fault.ErrorEventAfter {
		typ := e.fault.Type
		if typ == "" {
			typ = "overloaded_error"
		}
		msg := e.fault.Message
		if msg == "" {
			msg = "Overloaded"
		}
		if e.dialect == Anthropic {
			b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
			fmt.Fprintf(e.w, "event: error\ndata: %s\n\n", b)
		} else {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": e.fault.Code}})
			fmt.Fprintf(e.w, "data: %s\n\n", b)
		}
		e.f.Flush()
		return errAborted
	}
	if e.fault != nil && e.fault.MalformedAfter > 0 && e.n >= e.fault.MalformedAfter {
		if name != "" {
			fmt.Fprintf(e.w, "event: %s\n", name)
		}
		fmt.Fprint(e.w, "data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {oops\n\n")
		e.f.Flush()
		return errAborted
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	} else {
		fmt.Fprintf(e.w, "data: %s\n\n", b)
	}
	e.f.Flush()
	e.n++
	return nil
}

func startSSE(r *http.Request, w http.ResponseWriter, d Dialect, rp Reply) *sse {
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("cache-control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return &sse{ctx: r.Context(), delay: rp.EventDelay, w: w, f: fl, fault: rp.Fault, dialect: d}
}

// writeJSON writes a 200 JSON body, or half of it and a cut when the fault
// asks for a dropped connection.
func writeJSON(w http.ResponseWriter, v any, f *Fault) {
	b, _ := json.Marshal(v)
	w.Header().Set("content-type", "application/json")
	if f != nil && f.CutAfter > 0 {
		w.Header().Set("content-length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b[:len(b)/2])
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// estimate returns about one token per four bytes, at least 1.
func estimate(n int) int64 {
	if n < 4 {
		return 1
	}
	return int64(n / 4)
}

// replyText is the text a reply shows (structured JSON or plain text).
func (rp Reply) replyText() string {
	if len(rp.Structured) > 0 {
		return string(rp.Structured)
	}
	return rp.Text
}

// splitHalf splits s into two fragments, to exercise delta concatenation.
func splitHalf(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	// split on a rune boundary
	i := len(s) / 2
	for i < len(s) && !utf8Start(s[i]) {
		i++
	}
	return []string{s[:i], s[i:]}
}

// splitText fragments a reply's text for streaming (see Reply.ChunkSize).
func splitText(s string, size int) []string {
	if size <= 0 {
		return splitHalf(s)
	}
	var out []string
	for len(s) > size {
		i := size
		for i > 0 && !utf8Start(s[i]) {
			i--
		}
		if i == 0 { // a rune longer than size: keep it whole
			i = size
			for i < len(s) && !utf8Start(s[i]) {
				i++
			}
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func inputOrEmpty(in json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(in)) == 0 {
		return json.RawMessage(`{}`)
	}
	return in
}

func bearer(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// pipeListener is a net.Listener over in-process pipes.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "fakellm.invalid:80" }

// answer answers a decoded request the same way for every wire format: the
// next reply (or a 400 when there is none), its delay (499 when the client
// gave up), its fault, or else the reply itself written by write.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, body []byte, req Request, write func(Reply)) {
	rp, err := s.reply(req)
	if err != nil {
		s.fail(w, r, body, req, http.StatusBadRequest, "", "", err.Error())
		return
	}
	if !wait(r.Context(), s.opts.Delay+rp.Delay) {
		s.record(r, body, req, 499)
		return
	}
	if s.applyFault(w, r, body, req, rp.Fault) {
		return
	}
	s.record(r, body, req, http.StatusOK)
	write(rp)
}
