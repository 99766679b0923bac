package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/tracing"
)

// commandTracing is a command's OpenTelemetry tracing, set up from the
// OTEL_* environment (docs/observability.md); the zero value is off.
type commandTracing struct {
	t      *tracing.Exporter
	stderr io.Writer
	// tees are the emitters made by emitter; stop closes them, so a run
	// that ends before journaling run.end still exports ended spans.
	tees []*tracing.Emitter
}

// startTracing sets tracing up from the environment and returns ctx joined
// to a TRACEPARENT trace. A configuration capstan cannot honour is one
// warning, and the command runs without tracing: observability never stops
// a run.
func startTracing(ctx context.Context, stderr io.Writer) (context.Context, *commandTracing) {
	otelLogOnce.Do(func() { otel.SetLogger(logr.New(&otelLogSink{w: os.Stderr})) })
	t, err := tracing.Setup(ctx, tracing.ExportOptions{Getenv: os.Getenv, Console: stderr,
		Warn: func(msg string) { fmt.Fprintln(stderr, "capstan: warning: tracing:", msg) }})
	if err != nil {
		fmt.Fprintln(stderr, "capstan: warning: tracing off:", err)
		return ctx, &commandTracing{}
	}
	if t == nil {
		return ctx, &commandTracing{}
	}
	return t.Context(ctx), &commandTracing{t: t, stderr: stderr}
}

// provider is the tracer provider, or nil when tracing is off.
func (c *commandTracing) provider() trace.TracerProvider {
	if c.t == nil {
		return nil
	}
	return c.t.Provider()
}

// emitter puts a tracing tee in front of next when tracing is on.
func (c *commandTracing) emitter(ctx context.Context, next event.Emitter) event.Emitter {
	if c.t == nil {
		return next
	}
	tee := tracing.New(tracing.Config{Provider: c.t.Provider(), Parent: context.WithoutCancel(ctx), Next: next,
		Secrets: proc.SecretValues(os.Environ())})
	c.tees = append(c.tees, tee)
	return tee
}

// stop flushes the spans (bounded by tracing.DefaultShutdownTimeout) and
// warns once if they could not be exported.
func (c *commandTracing) stop(ctx context.Context) {
	if c.t == nil {
		return
	}
	for _, tee := range c.tees {
		tee.Close()
	}
	if err := c.t.Shutdown(ctx); err != nil {
		fmt.Fprintln(c.stderr, "capstan: warning: tracing:", err)
	}
}

// otelLogOnce installs the SDK's logger once per process; it writes to the
// process's stderr, which is the command's stderr outside tests.
var otelLogOnce sync.Once

// otelLogSink is the OpenTelemetry SDK's logger in capstan: errors become
// one warning line each, without the key/value pairs the SDK attaches
// (they can hold the raw OTEL_EXPORTER_OTLP_HEADERS entry, an API key).
// The SDK's complaints about the endpoint and header variables are dropped:
// tracing.Setup parses those itself and has already warned.
type otelLogSink struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *otelLogSink) Init(logr.RuntimeInfo)          {}
func (s *otelLogSink) Enabled(int) bool               { return false }
func (s *otelLogSink) Info(int, string, ...any)       {}
func (s *otelLogSink) WithValues(...any) logr.LogSink { return s }
func (s *otelLogSink) WithName(string) logr.LogSink   { return s }
func (s *otelLogSink) Error(err error, msg string, _ ...any) {
	switch msg {
	case "parse headers", "escape header value", "parse url", "otlptrace: parse endpoint url":
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	line := "capstan: warning: tracing: " + msg
	if err != nil {
		line += ": " + err.Error()
	}
	fmt.Fprintln(s.w, strings.TrimSpace(line))
}
