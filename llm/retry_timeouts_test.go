package llm_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/anthropic"
	"github.com/capstan-dev/capstan/llm/openai"
)

// retries records model.retry events.
type retries struct {
	mu sync.Mutex
	ev []event.RetryEvent
}

func (r *retries) Emit(p event.Payload) {
	data := any(p)
	if e, ok := data.(event.RetryEvent); ok {
		r.mu.Lock()
		r.ev = append(r.ev, e)
		r.mu.Unlock()
	}
}

// short timeouts so a stall is noticed in a second, not minutes. They must
// stay well above what a healthy loopback answer can take on a loaded CI
// machine under -race: the attempt that should succeed is held to them too.
// FirstByte counts from the start of the request, so it exceeds Connect.
var short = llm.Timeouts{Connect: time.Second, FirstByte: 2 * time.Second, StreamIdle: time.Second}

// instant retries without waiting.
var instant = llm.RetryPolicy{Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}

// providers builds each HTTP provider against a fake server of its dialect.
var providers = []struct {
	name    string
	dialect fakellm.Dialect
	open    func(t *testing.T, url string, hc *http.Client, to llm.Timeouts, ev *retries) llm.Model
}{
	{"anthropic", fakellm.Anthropic, func(t *testing.T, url string, hc *http.Client, to llm.Timeouts, ev *retries) llm.Model {
		m, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: url, HTTPClient: hc, Timeouts: to, Retry: instant, Events: ev})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}},
	{"openai", fakellm.OpenAI, func(t *testing.T, url string, hc *http.Client, to llm.Timeouts, ev *retries) llm.Model {
		m, err := openai.New(openai.Config{APIKey: "k", BaseURL: url, HTTPClient: hc, Timeouts: to, Retry: instant, Events: ev})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}},
}

func ask(m llm.Model) (*llm.Response, error) {
	return m.Generate(context.Background(), &llm.Request{Messages: []event.Message{{Role: event.RoleUser, Text: "hi"}}})
}

// A server that stalls before the headers, or after the first stream
// events, is given up on after the timeout and the request is retried
// like a dropped stream; the retry succeeds.
func TestStalledServerTimesOutAndIsRetried(t *testing.T) {
	stalls := map[string]fakellm.Reply{
		"before headers": {Delay: time.Hour},
		"mid stream":     {Text: "never finished", ChunkSize: 2, Fault: &fakellm.Fault{StallAfter: 2}},
	}
	for _, p := range providers {
		for name, stall := range stalls {
			t.Run(p.name+" "+name, func(t *testing.T) {
				srv := fakellm.Start(p.dialect, fakellm.Options{Replies: []fakellm.Reply{stall, {Text: "answer"}}})
				defer srv.Close()
				ev := &retries{}
				began := time.Now()
				resp, err := ask(p.open(t, srv.URL, srv.Client(), short, ev))
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Text != "answer" || len(ev.ev) != 1 {
					t.Fatalf("text %q, retries %+v", resp.Message.Text, ev.ev)
				}
				if e := ev.ev[0]; e.Code != agenterr.CodeSdkConnection || !strings.Contains(e.Message, "timed out") {
					t.Fatalf("retry event %+v", e)
				}
				if waited := time.Since(began); waited > 30*time.Second {
					t.Fatalf("the stall held the request for %s", waited)
				}
			})
		}
	}
}

// A server that never stops stalling ends the call with a recoverable
// connection error after the policy's attempts.
func TestPersistentStallIsRecoverableConnectionError(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := fakellm.Start(p.dialect, fakellm.Options{Respond: func(fakellm.Request) fakellm.Reply {
				return fakellm.Reply{Text: "abcdef", ChunkSize: 1, Fault: &fakellm.Fault{StallAfter: 1}}
			}})
			defer srv.Close()
			ev := &retries{}
			_, err := ask(p.open(t, srv.URL, srv.Client(), short, ev))
			e := agenterr.From(err)
			if e == nil || e.Code != agenterr.CodeSdkConnection || !e.Recoverable || !strings.Contains(e.Message, "idle") {
				t.Fatalf("%v", err)
			}
			if len(ev.ev) != llm.DefaultMaxAttempts-1 {
				t.Fatalf("%d retries", len(ev.ev))
			}
		})
	}
}

// A connection that cannot be opened in time fails the attempt (and is
// retried) instead of hanging.
func TestConnectTimeout(t *testing.T) {
	hang := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}}
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			ev := &retries{}
			_, err := ask(p.open(t, "http://192.0.2.1:9", hang, short, ev))
			e := agenterr.From(err)
			if e == nil || e.Code != agenterr.CodeSdkConnection || !strings.Contains(e.Message, "no connection to") || len(ev.ev) != llm.DefaultMaxAttempts-1 {
				t.Fatalf("%v retries=%d", err, len(ev.ev))
			}
		})
	}
}

// A slow but steady stream is not cut: the idle timeout counts silence,
// not the length of the answer. The stream (24 events 50ms apart) lasts
// more than twice the idle timeout, which is ten times the gap between
// events, so a scheduling hiccup on a loaded machine does not cut it.
func TestSteadySlowStreamIsNotCut(t *testing.T) {
	text := strings.Repeat("x", 24)
	srv := fakellm.Start(fakellm.Anthropic, fakellm.Options{Replies: []fakellm.Reply{
		{Text: text, ChunkSize: 1, EventDelay: 50 * time.Millisecond},
	}})
	defer srv.Close()
	ev := &retries{}
	to := llm.Timeouts{StreamIdle: 500 * time.Millisecond}
	resp, err := ask(providers[0].open(t, srv.URL, srv.Client(), to, ev))
	if err != nil || resp.Message.Text != text || len(ev.ev) != 0 {
		t.Fatalf("%v %+v retries=%v", err, resp, ev.ev)
	}
}

// With the stream-idle timeout off (negative) and a first-byte timeout,
// a stream of many events is read to its end: the one timer of a request
// is the first-byte timeout only until the headers arrive.
func TestFirstByteTimeoutAloneDoesNotCutTheStream(t *testing.T) {
	text := strings.Repeat("x", 24)
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := fakellm.Start(p.dialect, fakellm.Options{Replies: []fakellm.Reply{{Text: text, ChunkSize: 1, EventDelay: 20 * time.Millisecond}}})
			defer srv.Close()
			ev := &retries{}
			to := llm.Timeouts{FirstByte: time.Minute, StreamIdle: -1}
			resp, err := ask(p.open(t, srv.URL, srv.Client(), to, ev))
			if err != nil || resp.Message.Text != text || len(ev.ev) != 0 {
				t.Fatalf("%v %+v retries=%v", err, resp, ev.ev)
			}
		})
	}
}

func TestTimeoutsDefaultsAndOverride(t *testing.T) {
	d := llm.Timeouts{}.Effective()
	if d.Connect != llm.DefaultConnectTimeout || d.FirstByte != llm.DefaultFirstByteTimeout || d.StreamIdle != llm.DefaultStreamIdleTimeout {
		t.Fatalf("%+v", d)
	}
	o := llm.Timeouts{Connect: time.Second, StreamIdle: 2 * time.Second}.Override(llm.Timeouts{StreamIdle: 3 * time.Second})
	if o.Connect != time.Second || o.StreamIdle != 3*time.Second || o.FirstByte != 0 {
		t.Fatalf("%+v", o)
	}
	// The base client is not changed.
	base := &http.Client{Transport: &http.Transport{}}
	c := short.Client(base)
	if c == base || c.Transport == base.Transport {
		t.Fatal("base client modified")
	}
}

// A retry-after over 60 s is waited out up to the ceiling; past the
// ceiling the call stops at once with the recoverable error and a hint
// saying when to resume.
func TestLongRetryAfterAgainstFakeServers(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := fakellm.Start(p.dialect, fakellm.Options{Replies: []fakellm.Reply{
				{Fault: &fakellm.Fault{Status: 429, RetryAfter: "90"}},
				{Text: "after the wait"},
				{Fault: &fakellm.Fault{Status: 429, RetryAfter: "7200"}},
			}})
			defer srv.Close()
			var waits []time.Duration
			pol := llm.RetryPolicy{Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			var m llm.Model
			switch p.dialect {
			case fakellm.Anthropic:
				m, _ = anthropic.New(anthropic.Config{APIKey: "k", BaseURL: srv.URL, HTTPClient: srv.Client(), Retry: pol})
			default:
				m, _ = openai.New(openai.Config{APIKey: "k", BaseURL: srv.URL, HTTPClient: srv.Client(), Retry: pol})
			}
			resp, err := ask(m)
			if err != nil || resp.Message.Text != "after the wait" || len(waits) != 1 || waits[0] != 90*time.Second {
				t.Fatalf("%v %v waits=%v", err, resp, waits)
			}
			_, err = ask(m)
			e := agenterr.From(err)
			if e == nil || e.Code != agenterr.CodeSdkRateLimit || !e.Recoverable || !strings.Contains(e.Hint, "resume the run after ") || len(waits) != 1 {
				t.Fatalf("%v hint=%q waits=%v", err, e.Hint, waits)
			}
			if n := len(srv.Requests()); n != 3 {
				t.Fatalf("%d requests: the over-long wait was retried", n)
			}
		})
	}
}

func TestTimeoutsWithinBudget(t *testing.T) {
	for _, c := range []struct {
		in          llm.Timeouts
		budget      time.Duration
		first, idle time.Duration
	}{
		{llm.Timeouts{}, 0, 0, 0},
		{llm.Timeouts{}, time.Hour, 0, 0},
		{llm.Timeouts{}, 2 * time.Minute, 30 * time.Second, 30 * time.Second},
		{llm.Timeouts{}, 20 * time.Second, llm.MinBudgetTimeout, llm.MinBudgetTimeout},
		{llm.Timeouts{FirstByte: time.Minute}, 2 * time.Minute, time.Minute, 30 * time.Second},
		{llm.Timeouts{StreamIdle: -1}, 2 * time.Minute, 30 * time.Second, -1},
	} {
		got := c.in.WithinBudget(c.budget)
		if got.FirstByte != c.first || got.StreamIdle != c.idle || got.Connect != c.in.Connect {
			t.Errorf("%+v within %s = %+v, want first byte %s, idle %s", c.in, c.budget, got, c.first, c.idle)
		}
	}
}
