package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Timeouts.
const (
	DefaultConnectTimeout    = 10 * time.Second
	DefaultFirstByteTimeout  = 120 * time.Second
	DefaultStreamIdleTimeout = 90 * time.Second
)

// Timeouts bound the phases of one model request. A request that runs
// over one fails like a dropped connection: a retryable SDK_CONNECTION
// failure, retried per the RetryPolicy. Zero fields use the defaults; a
// negative field turns that timeout off.
type Timeouts struct {
	// Connect bounds opening the TCP (and TLS) connection.
	Connect time.Duration `json:"connect,omitempty"`
	// FirstByte bounds the wait from sending the request to the response
	// headers.
	FirstByte time.Duration `json:"firstByte,omitempty"`
	// StreamIdle bounds the silence between two reads of the response
	// body (between stream events).
	StreamIdle time.Duration `json:"streamIdle,omitempty"`
}

// Effective returns t with zero fields replaced by the defaults.
func (t Timeouts) Effective() Timeouts {
	if t.Connect == 0 {
		t.Connect = DefaultConnectTimeout
	}
	if t.FirstByte == 0 {
		t.FirstByte = DefaultFirstByteTimeout
	}
	if t.StreamIdle == 0 {
		t.StreamIdle = DefaultStreamIdleTimeout
	}
	return t
}

// MinBudgetTimeout is the least WithinBudget scales a timeout down to.
const MinBudgetTimeout = 10 * time.Second

// WithinBudget returns t with the first-byte and stream-idle timeouts that
// are left at their defaults (zero) scaled to a quarter of a small time
// budget (at least MinBudgetTimeout), so that a request that stalls is
// retried within the budget instead of using all of it: with the defaults
// (120 s, 90 s), a stall in a run of a two-minute budget would otherwise
// end the run. Timeouts set explicitly, and budget 0 (none), are kept.
func (t Timeouts) WithinBudget(budget time.Duration) Timeouts {
	if budget <= 0 {
		return t
	}
	scaled := max(budget/4, MinBudgetTimeout)
	if t.FirstByte == 0 && scaled < DefaultFirstByteTimeout {
		t.FirstByte = scaled
	}
	if t.StreamIdle == 0 && scaled < DefaultStreamIdleTimeout {
		t.StreamIdle = scaled
	}
	return t
}

// Override returns t with the non-zero fields of o replacing its own.
func (t Timeouts) Override(o Timeouts) Timeouts {
	if o.Connect != 0 {
		t.Connect = o.Connect
	}
	if o.FirstByte != 0 {
		t.FirstByte = o.FirstByte
	}
	if o.StreamIdle != 0 {
		t.StreamIdle = o.StreamIdle
	}
	return t
}

// ErrTimeout is wrapped by every error a Timeouts client returns when a
// timeout fires.
var ErrTimeout = errors.New("model request timed out")

// Client returns an HTTP client that enforces t (with defaults) on every
// request, built on base (nil = http.DefaultClient). base is not changed.
func (t Timeouts) Client(base *http.Client) *http.Client {
	t = t.Effective()
	if base == nil {
		base = http.DefaultClient
	}
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	if tr, ok := next.(*http.Transport); ok && t.Connect > 0 {
		tr = tr.Clone()
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
		}
		connect := t.Connect
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, connect)
			defer cancel()
			c, err := dial(ctx, network, addr)
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w: no connection to %s within %s", ErrTimeout, addr, connect)
			}
			return c, err
		}
		if tr.TLSHandshakeTimeout == 0 || tr.TLSHandshakeTimeout > connect {
			tr.TLSHandshakeTimeout = connect
		}
		next = tr
	}
	c := *base
	c.Transport = &timeoutTransport{next: next, t: t}
	return &c
}

// timeoutTransport enforces the first-byte and stream-idle timeouts by
// cancelling the request's context.
type timeoutTransport struct {
	next http.RoundTripper
	t    Timeouts
}

func (tt *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	// One watcher and one timer per request: the first-byte timeout until
	// the response headers arrive, then the stream-idle timeout, reset by
	// every read.
	b := &idleBody{idle: tt.t.StreamIdle, firstByte: tt.t.FirstByte, ctx: ctx, cancel: cancel}
	if d := tt.t.FirstByte; d > 0 {
		b.timer = time.AfterFunc(d, b.expire)
	}
	resp, err := tt.next.RoundTrip(req.WithContext(ctx))
	if b.timer != nil {
		b.timer.Stop()
	}
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrTimeout) {
			err = cause
		}
		cancel(nil)
		return nil, err
	}
	if context.Cause(ctx) != nil && errors.Is(context.Cause(ctx), ErrTimeout) {
		resp.Body.Close()
		cancel(nil)
		return nil, context.Cause(ctx)
	}
	b.body = resp.Body
	b.streaming.Store(true)
	if b.idle > 0 {
		if b.timer != nil {
			b.timer.Reset(b.idle)
		} else {
			b.timer = time.AfterFunc(b.idle, b.expire)
		}
	}
	resp.Body = b
	return resp, nil
}

// idleBody fails a read that waits longer than idle for data; before the
// response headers, its timer is the first-byte timeout.
type idleBody struct {
	body            io.ReadCloser
	idle, firstByte time.Duration
	ctx             context.Context
	cancel          context.CancelCauseFunc
	timer           *time.Timer
	// streaming is set once the headers have arrived: the timer is then
	// the stream-idle timeout.
	streaming atomic.Bool
	once      sync.Once
}

// expire cancels the request when its timer fires.
func (b *idleBody) expire() {
	if b.streaming.Load() {
		b.cancel(fmt.Errorf("%w: the stream was idle for %s", ErrTimeout, b.idle))
		return
	}
	b.cancel(fmt.Errorf("%w: no response headers within %s", ErrTimeout, b.firstByte))
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); errors.Is(cause, ErrTimeout) {
			return n, cause
		}
	}
	if b.idle > 0 && err == nil {
		b.timer.Reset(b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.once.Do(func() {
		if b.timer != nil {
			b.timer.Stop()
		}
	})
	err := b.body.Close()
	b.cancel(nil)
	return err
}
