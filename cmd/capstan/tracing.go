package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/otel/trace"

	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/tracing"
	"github.com/capstan-dev/capstan/tracing/otelenv"
)

// commandTracing is a command's OpenTelemetry tracing, set up from the
// OTEL_* environment (docs/observability.md); the zero value is off.
type commandTracing struct {
	t      *otelenv.Tracing
	stderr io.Writer
}

// startTracing sets tracing up from the environment and returns ctx joined
// to a TRACEPARENT trace. A configuration capstan cannot honour is one
// warning, and the command runs without tracing: observability never stops
// a run.
func startTracing(ctx context.Context, stderr io.Writer) (context.Context, *commandTracing) {
	t, err := otelenv.Setup(ctx, otelenv.Options{Getenv: os.Getenv, Console: stderr})
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
func (c *commandTracing) emitter(ctx context.Context, next journal.Emitter) journal.Emitter {
	if c.t == nil {
		return next
	}
	return tracing.New(tracing.Config{Provider: c.t.Provider(), Parent: context.WithoutCancel(ctx), Next: next,
		Secrets: tracing.SecretValues(os.Environ())})
}

// stop flushes the spans (bounded by otelenv.DefaultShutdownTimeout) and
// warns once if they could not be exported.
func (c *commandTracing) stop(ctx context.Context) {
	if c.t == nil {
		return
	}
	if err := c.t.Shutdown(ctx); err != nil {
		fmt.Fprintln(c.stderr, "capstan: warning: tracing:", err)
	}
}
