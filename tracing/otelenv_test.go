package tracing

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// envOf is a Getenv over a fixed map.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// setup runs Setup over env and collects the warnings.
func setup(t *testing.T, env map[string]string, console *bytes.Buffer) (*Exporter, []string, error) {
	t.Helper()
	var warnings []string
	opts := ExportOptions{Getenv: envOf(env), ShutdownTimeout: 2 * time.Second,
		Warn: func(s string) { warnings = append(warnings, s) }}
	if console != nil {
		opts.Console = console
	}
	tr, err := Setup(context.Background(), opts)
	if tr != nil {
		t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	}
	return tr, warnings, err
}

const validTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestSetupOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"nothing set":                 {},
		"TRACEPARENT alone":           {"TRACEPARENT": validTP},
		"TRACEPARENT and TRACESTATE":  {"TRACEPARENT": validTP, "TRACESTATE": "k=v"},
		"headers alone":               {"OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
		"protocol alone":              {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"service name alone":          {"OTEL_SERVICE_NAME": "svc"},
		"exporter none":               {"OTEL_TRACES_EXPORTER": "none"},
		"exporter none with endpoint": {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"exporter NONE, spaces":       {"OTEL_TRACES_EXPORTER": " NONE "},
		"SDK disabled with endpoint":  {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"SDK disabled with exporter":  {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"},
		"blank endpoint":              {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
	} {
		t.Run(name, func(t *testing.T) {
			tr, warnings, err := setup(t, env, nil)
			if tr != nil || err != nil || len(warnings) > 0 {
				t.Fatalf("Setup = %v, %v, warnings %q; want off, silently", tr, err, warnings)
			}
		})
	}
}

func TestSetupOn(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"generic endpoint":              {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"traces endpoint":               {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"},
		"otlp without endpoint":         {"OTEL_TRACES_EXPORTER": "otlp"},
		"otlp, upper case":              {"OTEL_TRACES_EXPORTER": "OTLP"},
		"http/protobuf":                 {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
		"SDK disabled=false":            {"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"traces protocol http/protobuf": {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
	} {
		t.Run(name, func(t *testing.T) {
			tr, warnings, err := setup(t, env, nil)
			if tr == nil || err != nil || len(warnings) > 0 {
				t.Fatalf("Setup = %v, %v, warnings %q; want tracing on", tr, err, warnings)
			}
		})
	}
}

// A configuration capstan cannot honour is an error (the command warns
// and runs without tracing); the message names the problem but never a
// URL or header value.
func TestSetupErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"},
		{"http/json", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json is not supported"},
		{"traces protocol grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "grpc is not supported"},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin is not supported"},
		{"two exporters", map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, "one exporter"},
		{"console without output", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "no output"},
		{"endpoint without scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "secret-host:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL"},
		{"endpoint other scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://secret-host"}, "must be an http:// or https:// URL"},
		{"endpoint without host", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http:///v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be"},
		{"endpoint unparsable", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://secret-host:port%zz"}, "not a valid URL"},
		{"bad traces endpoint wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "secret-host"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, err := setup(t, tc.env, nil)
			if tr != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Setup = %v, %v; want an error containing %q", tr, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-host") {
				t.Errorf("error quotes the URL: %v", err)
			}
		})
	}
}

func TestTracesURL(t *testing.T) {
	for _, tc := range []struct {
		generic, traces string
		want            string
		note            bool
	}{
		{"", "", "", false},
		{"http://h:4318", "", "http://h:4318/v1/traces", false},
		{"http://h:4318/", "", "http://h:4318/v1/traces", false},
		{"https://h/otlp", "", "https://h/otlp/v1/traces", false},
		{"https://h/otlp/", "", "https://h/otlp/v1/traces", false},
		{"http://h:4318?x=1#f", "", "http://h:4318/v1/traces", false},
		// The generic endpoint is a base: a full URL in it is appended to,
		// as the specification (and the Go exporter) does, with a warning.
		{"http://h:4318/v1/traces", "", "http://h:4318/v1/traces/v1/traces", true},
		{"http://h:4318/v1/traces/", "", "http://h:4318/v1/traces/v1/traces", true},
		// The signal-specific endpoint is used as is.
		{"", "http://h:4318/v1/traces", "http://h:4318/v1/traces", false},
		{"", "http://h:4318/custom", "http://h:4318/custom", false},
		{"", "http://h:4318/custom/", "http://h:4318/custom/", false},
		{"", "http://h:4318", "http://h:4318/", false},
		{"http://base:1/p", "http://h:4318/t", "http://h:4318/t", false},
		{"http://base:1/v1/traces", "http://h:4318/t", "http://h:4318/t", false},
	} {
		got, note, err := tracesURL(envOf(map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": tc.generic, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": tc.traces}))
		if err != nil || got != tc.want || (note != "") != tc.note {
			t.Errorf("tracesURL(%q, %q) = %q, note %q, %v; want %q, note %v", tc.generic, tc.traces, got, note, err, tc.want, tc.note)
		}
	}
}

// receiver is a loopback OTLP/HTTP endpoint that records the path and
// headers of each export.
type receiver struct {
	mu      sync.Mutex
	paths   []string
	headers []http.Header
}

func newReceiver(t *testing.T) (*receiver, string) {
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.headers = append(r.headers, req.Header.Clone())
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// exportOne exports one span with tracing set up from env.
func exportOne(t *testing.T, env map[string]string) []string {
	t.Helper()
	tr, warnings, err := setup(t, env, nil)
	if tr == nil || err != nil {
		t.Fatalf("Setup = %v, %v", tr, err)
	}
	_, sp := tr.Provider().Tracer("test").Start(context.Background(), "span")
	sp.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	return warnings
}

// The URL the exporter really posts to: no path dropped or appended twice.
func TestExportPath(t *testing.T) {
	for _, tc := range []struct {
		name, generic, traces, want string
	}{
		{"generic", "", "", "/v1/traces"},
		{"generic with prefix", "/otlp", "", "/otlp/v1/traces"},
		{"generic with prefix and slash", "/otlp/", "", "/otlp/v1/traces"},
		{"traces as is", "", "/custom/path", "/custom/path"},
		{"traces standard", "", "/v1/traces", "/v1/traces"},
		{"traces without path", "", "-", "/"},
		{"traces wins", "/base", "/t", "/t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, base := newReceiver(t)
			env := map[string]string{}
			if tc.traces == "" {
				env["OTEL_EXPORTER_OTLP_ENDPOINT"] = base + tc.generic
			} else {
				if tc.generic != "" {
					env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:1" + tc.generic
				}
				env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = base + strings.TrimPrefix(tc.traces, "-")
			}
			exportOne(t, env)
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.paths) != 1 || r.paths[0] != tc.want {
				t.Fatalf("exported to %q, want [%q]", r.paths, tc.want)
			}
		})
	}
}

func TestExportHeaders(t *testing.T) {
	r, base := newReceiver(t)
	warnings := exportOne(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": base,
		"OTEL_EXPORTER_OTLP_HEADERS":  " api-key = s3cr3t%20value ,x-team=t1,,Authorization Bearer leaked-token,=orphan-value,bad key=v,x-pct=%zzleak,x-ctl=a%0Aleak",
	})
	r.mu.Lock()
	h := r.headers[0]
	r.mu.Unlock()
	if got := h.Get("Api-Key"); got != "s3cr3t value" {
		t.Errorf("Api-Key = %q", got)
	}
	if got := h.Get("X-Team"); got != "t1" {
		t.Errorf("X-Team = %q", got)
	}
	for _, k := range []string{"Authorization", "X-Pct", "X-Ctl"} {
		if v := h.Get(k); v != "" {
			t.Errorf("malformed %s sent as %q", k, v)
		}
	}
	want := []string{
		"OTEL_EXPORTER_OTLP_HEADERS: entry 4 has no '='; it is ignored",
		"OTEL_EXPORTER_OTLP_HEADERS: entry 5 has an empty key or a key that is not an HTTP token; it is ignored",
		"OTEL_EXPORTER_OTLP_HEADERS: entry 6 has an empty key or a key that is not an HTTP token; it is ignored",
		"OTEL_EXPORTER_OTLP_HEADERS: entry 7 has an invalid %-escape in its value; it is ignored",
		"OTEL_EXPORTER_OTLP_HEADERS: entry 8 has a control character in its value; it is ignored",
	}
	if strings.Join(warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range warnings {
		if strings.Contains(w, "leak") || strings.Contains(w, "orphan") || strings.Contains(w, "s3cr3t") {
			t.Errorf("warning quotes a header: %q", w)
		}
	}
}

func TestTracesHeadersWin(t *testing.T) {
	r, base := newReceiver(t)
	exportOne(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":       base,
		"OTEL_EXPORTER_OTLP_HEADERS":        "a=generic,b=generic",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=traces",
	})
	r.mu.Lock()
	h := r.headers[0]
	r.mu.Unlock()
	if h.Get("A") != "traces" || h.Get("B") != "" {
		t.Errorf("headers a=%q b=%q, want the traces variable alone", h.Get("A"), h.Get("B"))
	}
}

func TestConsoleAfterShutdown(t *testing.T) {
	var out bytes.Buffer
	tr, warnings, err := setup(t, map[string]string{"OTEL_TRACES_EXPORTER": "console"}, &out)
	if tr == nil || err != nil || len(warnings) > 0 {
		t.Fatalf("Setup = %v, %v, %q", tr, err, warnings)
	}
	_, sp := tr.Provider().Tracer("test").Start(context.Background(), "console-span")
	sp.End()
	if out.Len() != 0 {
		t.Fatalf("console output before Shutdown: %q", out.String())
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"Name":"console-span"`) {
		t.Fatalf("console output: %q", out.String())
	}
}

func TestTraceparent(t *testing.T) {
	for _, tc := range []struct {
		name, tp, ts string
		valid        bool
	}{
		{"valid", validTP, "", true},
		{"valid with tracestate", validTP, "vendor=opaque", true},
		{"valid, bad tracestate dropped", validTP, "not a tracestate", true},
		{"valid, unknown future version", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "", true},
		{"garbage", "hello", "", false},
		{"short trace id", "00-4bf92f3577b34da6-00f067aa0ba902b7-01", "", false},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", false},
		{"zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "", false},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", false},
		{"non-hex", "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01", "", false},
		{"version 00 with extra field", validTP + "-extra", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, warnings, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
				"TRACEPARENT": tc.tp, "TRACESTATE": tc.ts}, nil)
			if tr == nil || err != nil {
				t.Fatalf("Setup = %v, %v: an invalid TRACEPARENT must not turn tracing off", tr, err)
			}
			sc := trace.SpanContextFromContext(tr.Context(context.Background()))
			if tc.valid {
				if len(warnings) > 0 || !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
					t.Fatalf("context %v, warnings %q; want the remote parent, silently", sc, warnings)
				}
				if tc.ts == "vendor=opaque" && sc.TraceState().Get("vendor") != "opaque" {
					t.Errorf("tracestate lost: %v", sc.TraceState())
				}
				return
			}
			if sc.IsValid() {
				t.Errorf("invalid traceparent joined: %v", sc)
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], "TRACEPARENT is not a valid W3C traceparent") ||
				!strings.Contains(warnings[0], "new trace") {
				t.Errorf("warnings %q; want one saying the run starts a new trace", warnings)
			}
		})
	}
}

func TestResourceAttrs(t *testing.T) {
	get := func(env map[string]string, version string) (map[string]string, []string) {
		var warnings []string
		m := map[string]string{}
		for _, kv := range resourceAttrs(envOf(env), version, func(s string) { warnings = append(warnings, s) }) {
			m[string(kv.Key)] = kv.Value.AsString()
		}
		return m, warnings
	}
	m, w := get(map[string]string{}, "1.2.3")
	if m["service.name"] != DefaultServiceName || m["service.version"] != "1.2.3" || len(w) > 0 {
		t.Errorf("defaults: %v %q", m, w)
	}
	m, w = get(map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=ci,service.version=9,broken"}, "1.2.3")
	if m["service.name"] != "from-attrs" || m["deployment.environment"] != "ci" || m["service.version"] != "9" || len(w) != 1 ||
		w[0] != "OTEL_RESOURCE_ATTRIBUTES: entry 4 has no '='; it is ignored" {
		t.Errorf("resource attributes: %v %q", m, w)
	}
	m, _ = get(map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs", "OTEL_SERVICE_NAME": "from-name"}, "")
	if m["service.name"] != "from-name" {
		t.Errorf("OTEL_SERVICE_NAME must win: %v", m)
	}
	if _, ok := m["service.version"]; ok {
		t.Errorf("service.version set without a version: %v", m)
	}
}

// problemRE is the only shape of a parse problem: it quotes nothing from
// the input.
var problemRE = regexp.MustCompile(`^X: entry [0-9]+ [a-zA-Z '=%-]+; it is ignored$`)

func FuzzParseKeyValues(f *testing.F) {
	for _, s := range []string{"", "a=b", " a = b , c=d%20e", "a", "=b", "a b=c", "a=%zz", "a=\n", ",,,", "a==b", "k=v=w,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kv, problems := parseKeyValues("X", s)
		for k, v := range kv {
			if !validKey(k) || !validValue(v) || strings.TrimSpace(v) != v {
				t.Errorf("accepted %q=%q", k, v)
			}
		}
		for _, p := range problems {
			if !problemRE.MatchString(p) {
				t.Errorf("problem %q", p)
			}
		}
		if len(kv)+len(problems) > strings.Count(s, ",")+1 {
			t.Errorf("%d pairs and %d problems from %d entries", len(kv), len(problems), strings.Count(s, ",")+1)
		}
	})
}

func FuzzParseTraceparent(f *testing.F) {
	f.Add(validTP, "")
	f.Add(validTP, "a=b,c=d")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")
	f.Add("hello", "x")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-zz", "")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		sc, err := parseTraceparent(tp, ts)
		if err != nil {
			if sc.IsValid() {
				t.Fatalf("error with a valid context %v", sc)
			}
			return
		}
		if !sc.IsValid() || !sc.IsRemote() {
			t.Fatalf("no error but context %v", sc)
		}
		// What was read is what a child would propagate.
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), carrier)
		again, err := parseTraceparent(carrier["traceparent"], carrier["tracestate"])
		if err != nil || !again.Equal(sc) {
			t.Fatalf("round trip %q: %v, %v; want %v", carrier, again, err, sc)
		}
	})
}
