// Setup sets up OpenTelemetry tracing for a capstan command from
// the standard OTEL_* environment variables, the way every OpenTelemetry
// SDK reads them:
//
//	OTEL_TRACES_EXPORTER                otlp (default when an endpoint is set), console, none
//	OTEL_EXPORTER_OTLP_ENDPOINT         base URL; spans go to <base>/v1/traces
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  full URL for spans, used as is (wins over the base)
//	OTEL_EXPORTER_OTLP_HEADERS          k=v,k2=v2 sent with every export
//	OTEL_EXPORTER_OTLP_TRACES_HEADERS   the same, for spans only (wins over the above)
//	OTEL_EXPORTER_OTLP_PROTOCOL         only http/protobuf is supported
//	OTEL_SERVICE_NAME                   service.name (default capstan)
//	OTEL_RESOURCE_ATTRIBUTES            extra resource attributes
//	OTEL_SDK_DISABLED=true              tracing off
//	TRACEPARENT, TRACESTATE             W3C trace context the run joins
//
//	OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT            per request, in ms (default 10000)
//	OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION        gzip or none
//	OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE        CA file (PEM) for https
//	OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_CERTIFICATE client certificate and key (PEM), together
//	OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_KEY
//
// All of them are read through Options.Getenv.
//
// Tracing is off unless OTEL_TRACES_EXPORTER or an OTLP endpoint is set.
// Exporting never fails or stalls a run: spans are exported in the
// background, Shutdown waits a bounded time, and export failures are
// reported once by Shutdown instead of being logged per batch.

package tracing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "capstan"

// DefaultShutdownTimeout bounds the final flush.
const DefaultShutdownTimeout = 3 * time.Second

// Options configure Setup.
type ExportOptions struct {
	// Getenv reads the environment (required; os.Getenv in a command).
	Getenv func(string) string
	// Console receives the spans of OTEL_TRACES_EXPORTER=console, one JSON
	// object per line, when Shutdown runs — after the run's progress
	// output, never interleaved with it.
	Console io.Writer
	// ServiceVersion is service.version ("" = not set).
	ServiceVersion string
	// ShutdownTimeout bounds Shutdown's flush (0 = DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Warn receives problems that do not turn tracing off — a malformed
	// header entry (skipped), an invalid TRACEPARENT (a new trace is
	// started) — one message each, never quoting a header value (nil =
	// discard).
	Warn func(string)
}

// Exporter is the span export set up for one command: its tracer provider,
// the trace context it joins and the exports Shutdown flushes.
type Exporter struct {
	provider *sdktrace.TracerProvider
	exporter *quietExporter
	console  *deferredWriter
	parent   trace.SpanContext
	timeout  time.Duration
	once     sync.Once
	err      error
}

// Setup reads the environment and returns the command's tracing, or nil
// when tracing is off. A configuration capstan cannot honour (an
// unsupported protocol or exporter) is an error: the caller warns and runs
// without tracing.
func Setup(ctx context.Context, opts ExportOptions) (*Exporter, error) {
	env := func(k string) string { return strings.TrimSpace(opts.Getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	kind := strings.ToLower(env("OTEL_TRACES_EXPORTER"))
	endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	switch {
	case kind == "" && !endpoint, kind == "none":
		return nil, nil
	case kind == "":
		kind = "otlp"
	case strings.Contains(kind, ","):
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: capstan supports one exporter (otlp, console or none)", kind)
	}
	warn := opts.Warn
	if warn == nil {
		warn = func(string) {}
	}
	t := &Exporter{timeout: opts.ShutdownTimeout}
	if t.timeout <= 0 {
		t.timeout = DefaultShutdownTimeout
	}
	var exp sdktrace.SpanExporter
	switch kind {
	case "otlp":
		e, err := otlpExporter(ctx, env, warn, t.timeout)
		if err != nil {
			return nil, err
		}
		exp = e
	case "console":
		if opts.Console == nil {
			return nil, errors.New("OTEL_TRACES_EXPORTER=console: no output for the spans")
		}
		t.console = &deferredWriter{out: opts.Console}
		e, err := stdouttrace.New(stdouttrace.WithWriter(t.console))
		if err != nil {
			return nil, fmt.Errorf("console exporter: %w", err)
		}
		exp = e
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s is not supported: use otlp, console or none", kind)
	}
	t.exporter = &quietExporter{SpanExporter: exp}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(resourceAttrs(env, opts.ServiceVersion, warn)...))
	if err != nil && res == nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	t.provider = sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithBatcher(t.exporter))
	if tp := env("TRACEPARENT"); tp != "" {
		sc, err := parseTraceparent(tp, env("TRACESTATE"))
		if err != nil {
			warn(err.Error())
		}
		t.parent = sc
	}
	return t, nil
}

// otlpExporter is the OTLP over HTTP exporter the OTEL_EXPORTER_OTLP_*
// variables describe: the protocol, the endpoint and the headers.
func otlpExporter(ctx context.Context, env func(string) string, warn func(string), timeout time.Duration) (sdktrace.SpanExporter, error) {
	proto := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported: capstan exports OTLP over http/protobuf only (unset it, and point the endpoint at the collector's HTTP port, usually 4318)", proto)
	}
	// Every setting is read through Getenv. Retries are bounded so
	// that an unreachable endpoint costs at most the shutdown timeout.
	u, note, err := tracesURL(env)
	if err != nil {
		return nil, err
	}
	if note != "" {
		warn(note)
	}
	var headers map[string]string
	name := "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	hv := env(name)
	if hv == "" {
		name = "OTEL_EXPORTER_OTLP_HEADERS"
		hv = env(name)
	}
	if hv != "" {
		h, problems := parseKeyValues(name, hv)
		for _, p := range problems {
			warn(p)
		}
		headers = h
	}
	client, err := newHTTPClient(env, u, headers, timeout)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	e, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	return e, nil
}

// Provider is the tracer provider spans are made with.
func (t *Exporter) Provider() trace.TracerProvider { return t.provider }

// Context returns ctx joined to the TRACEPARENT trace, when a valid one
// was given (an invalid one was reported to Options.Warn by Setup).
func (t *Exporter) Context(ctx context.Context) context.Context {
	if !t.parent.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, t.parent)
}

// Shutdown flushes the spans and stops the exporter, waiting at most the
// shutdown timeout whatever ctx allows (it is meant to run after a
// cancelled run too, so it does not inherit ctx's cancellation). The error
// is the first export failure, if any; calling it again returns the same.
func (t *Exporter) Shutdown(ctx context.Context) error {
	t.once.Do(func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
		defer cancel()
		err := t.provider.Shutdown(sctx)
		if first := t.exporter.firstErr(); first != nil {
			err = first
		}
		if t.console != nil {
			if werr := t.console.flush(); err == nil {
				err = werr
			}
		}
		if err != nil {
			t.err = fmt.Errorf("spans not exported: %w", err)
		}
	})
	return t.err
}

// resourceAttrs are the resource attributes: capstan's defaults, then
// OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME, each winning over the
// ones before (the OpenTelemetry specification's order).
func resourceAttrs(env func(string) string, version string, warn func(string)) []attribute.KeyValue {
	m := map[string]string{"service.name": DefaultServiceName}
	if version != "" {
		m["service.version"] = version
	}
	if v := env("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		kv, problems := parseKeyValues("OTEL_RESOURCE_ATTRIBUTES", v)
		for _, p := range problems {
			warn(p)
		}
		for k, v := range kv {
			m[k] = v
		}
	}
	if v := env("OTEL_SERVICE_NAME"); v != "" {
		m["service.name"] = v
	}
	out := make([]attribute.KeyValue, 0, len(m))
	for k, v := range m {
		out = append(out, attribute.String(k, v))
	}
	return out
}

// quietExporter keeps the first export error for Shutdown to report and
// tells the batch processor every export succeeded, so a collector that is
// down produces one warning, not one log line per batch.
type quietExporter struct {
	sdktrace.SpanExporter
	mu  sync.Mutex
	err error
}

func (q *quietExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := q.SpanExporter.ExportSpans(ctx, spans); err != nil {
		q.mu.Lock()
		if q.err == nil {
			q.err = err
		}
		q.mu.Unlock()
	}
	return nil
}

func (q *quietExporter) Shutdown(ctx context.Context) error {
	err := q.SpanExporter.Shutdown(ctx)
	q.mu.Lock()
	if q.err == nil && err != nil {
		q.err = err
	}
	q.mu.Unlock()
	return nil
}

func (q *quietExporter) firstErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// deferredWriter holds console output until flush, so spans printed while
// a run shows live progress do not garble it.
type deferredWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func (d *deferredWriter) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.Write(p)
}

func (d *deferredWriter) flush() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.buf.WriteTo(d.out)
	return err
}
