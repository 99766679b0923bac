package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The API key a user has in the environment; it must never be exported.
const testAPIKey = "sk-ant-api03-TRACING-TEST-never-export-me"

// otlpSink is a loopback OTLP/HTTP receiver that keeps every exported span
// and the raw request bodies.
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	raw   [][]byte
	svc   []string
}

func newOTLPSink(t *testing.T) (*otlpSink, string) {
	s := &otlpSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.raw = append(s.raw, b)
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					s.svc = append(s.svc, kv.Value.GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				s.spans = append(s.spans, ss.Spans...)
			}
		}
		s.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *otlpSink) take() []*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.spans
	s.spans = nil
	return out
}

func spanAttrs(sp *tracepb.Span) map[string]any {
	m := map[string]any{}
	for _, kv := range sp.Attributes {
		v := kv.Value
		switch v.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.GetIntValue()
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.GetBoolValue()
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.GetDoubleValue()
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

// runTracedCLI runs capstan as a process with the environment env added.
func runTracedCLI(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := cliCommand(args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = cmd.ProcessState.ExitCode()
		if code < 0 {
			t.Fatalf("capstan %v: %v\n%s", args, err, errb.String())
		}
	}
	return code, out.String(), errb.String()
}

func helloDir(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

type tree struct {
	byID     map[string]*tracepb.Span
	children map[string][]*tracepb.Span
	roots    []*tracepb.Span
}

func buildTree(spans []*tracepb.Span) tree {
	tr := tree{byID: map[string]*tracepb.Span{}, children: map[string][]*tracepb.Span{}}
	for _, s := range spans {
		tr.byID[hex.EncodeToString(s.SpanId)] = s
	}
	for _, s := range spans {
		p := hex.EncodeToString(s.ParentSpanId)
		if _, ok := tr.byID[p]; ok {
			tr.children[p] = append(tr.children[p], s)
		} else {
			tr.roots = append(tr.roots, s)
		}
	}
	return tr
}

func (tr tree) kids(s *tracepb.Span, prefix string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, c := range tr.children[hex.EncodeToString(s.SpanId)] {
		if strings.HasPrefix(c.Name, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// TestRunExportsSpansOverOTLP runs examples/hello with OTLP export to a
// loopback collector inside a CI job's trace, and checks the span tree, its
// attributes, and that nothing sensitive left the process.
func TestRunExportsSpansOverOTLP(t *testing.T) {
	sink, url := newOTLPSink(t)
	wd := t.TempDir()
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "OTEL_SERVICE_NAME=capstan-ci", "ANTHROPIC_API_KEY=" + testAPIKey,
		"TRACEPARENT=00-" + parentTrace + "-" + parentSpan + "-01"}
	code, _, stderr := runTracedCLI(t, env, "run", helloDir(t), "--workdir", wd, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, "tracing") {
		t.Errorf("tracing warned on a reachable collector:\n%s", stderr)
	}
	spans := sink.take()
	tr := buildTree(spans)
	if len(tr.roots) != 1 || tr.roots[0].Name != "capstan.run" {
		t.Fatalf("want one capstan.run root, got %d roots (%d spans)", len(tr.roots), len(spans))
	}
	run := tr.roots[0]
	if hex.EncodeToString(run.TraceId) != parentTrace || hex.EncodeToString(run.ParentSpanId) != parentSpan {
		t.Errorf("run span not in the TRACEPARENT trace: trace %x parent %x", run.TraceId, run.ParentSpanId)
	}
	ra := spanAttrs(run)
	if ra["capstan.agent.name"] != "hello" || ra["capstan.model"] != "script:script.yaml" || ra["capstan.completion_reason"] != "completed" ||
		!strings.HasPrefix(ra["capstan.run.id"].(string), "20") {
		t.Errorf("run attributes %v", ra)
	}
	if run.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
		t.Errorf("run status %v", run.Status)
	}
	iters := tr.kids(run, "capstan.iteration")
	if len(iters) != 2 {
		t.Fatalf("%d iteration spans, want 2", len(iters))
	}
	var tools []string
	for _, it := range iters {
		qs := tr.kids(it, "chat ")
		if len(qs) != 1 || qs[0].Name != "chat script.yaml" || qs[0].Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Fatalf("iteration %v: query spans %v", spanAttrs(it)["capstan.iteration"], qs)
		}
		qa := spanAttrs(qs[0])
		if qa["gen_ai.operation.name"] != "chat" || qa["gen_ai.provider.name"] != "script" || qa["gen_ai.request.model"] != "script.yaml" {
			t.Errorf("query attributes %v", qa)
		}
		for _, tool := range tr.kids(qs[0], "execute_tool ") {
			tools = append(tools, tool.Name)
			if spanAttrs(tool)["gen_ai.tool.call.id"] == nil || tool.EndTimeUnixNano < tool.StartTimeUnixNano {
				t.Errorf("tool span %s: %v", tool.Name, spanAttrs(tool))
			}
		}
	}
	if strings.Join(tools, ",") != "execute_tool Write,execute_tool Read,execute_tool Edit,execute_tool Read" {
		t.Errorf("tool spans %v", tools)
	}
	if len(sink.svc) == 0 || sink.svc[0] != "capstan-ci" {
		t.Errorf("service.name %v", sink.svc)
	}
	// Nothing sensitive: the API key, the prompts, the greeting the agent
	// wrote (tool input) and the model's replies.
	journalText := readJournal(t, wd)
	for _, raw := range sink.raw {
		for _, bad := range []string{testAPIKey, "Hello, world", "greeting.txt", "GREETING_WRITTEN", "HELLO_DONE"} {
			if bytes.Contains(raw, []byte(bad)) {
				t.Errorf("exported spans contain %q", bad)
			}
		}
	}
	if !strings.Contains(journalText, "Hello, world") || !strings.Contains(journalText, "HELLO_DONE") {
		t.Error("the journal lost the content tracing leaves out")
	}
}

// TestTracedFailureAndResume: a run stopped by its iteration budget exports
// an error status with the coded error; its resume is traced too.
func TestTracedFailureAndResume(t *testing.T) {
	sink, url := newOTLPSink(t)
	wd := t.TempDir()
	env := []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + url + "/v1/traces"}
	code, out, stderr := runTracedCLI(t, env, "run", helloDir(t), "--workdir", wd, "--max-iterations", "1", "--quiet", "--json")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	var res struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err, out)
	}
	run := buildTree(sink.take()).roots
	if len(run) != 1 || run[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || run[0].Status.GetMessage() != "BUDGET_EXCEEDED" {
		t.Fatalf("failed run: roots %d status %v", len(run), run[0].GetStatus())
	}
	if a := spanAttrs(run[0]); a["error.type"] != "BUDGET_EXCEEDED" || a["capstan.completion_reason"] != "max_iterations" {
		t.Errorf("failed run attributes %v", a)
	}

	code, _, stderr = runTracedCLI(t, env, "resume", res.RunID, "--max-iterations", "2", "--quiet")
	if code != 0 {
		t.Fatalf("resume exit %d\n%s", code, stderr)
	}
	tr := buildTree(sink.take())
	if len(tr.roots) != 1 {
		t.Fatalf("resume: %d roots", len(tr.roots))
	}
	a := spanAttrs(tr.roots[0])
	if a["capstan.run.id"] != res.RunID || a["capstan.completion_reason"] != "completed" || len(tr.kids(tr.roots[0], "capstan.iteration")) != 1 {
		t.Errorf("resumed run: %v, %d iterations", a, len(tr.kids(tr.roots[0], "capstan.iteration")))
	}
	if _, ok := a["capstan.run.resumed"]; !ok {
		t.Errorf("resumed run span lacks capstan.run.resumed: %v", a)
	}
}

// TestUnreachableCollectorDoesNotFailTheRun: spans that cannot be exported
// cost one warning, not the run.
func TestUnreachableCollectorDoesNotFailTheRun(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // a port nothing listens on
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url}
	code, _, stderr := runTracedCLI(t, env, "run", helloDir(t), "--workdir", t.TempDir(), "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "warning: tracing"); n != 1 {
		t.Errorf("%d tracing warnings, want 1:\n%s", n, stderr)
	}
}

func TestTracingConfigurationWarnings(t *testing.T) {
	for _, env := range [][]string{{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, {"OTEL_TRACES_EXPORTER=zipkin"}} {
		code, _, stderr := runTracedCLI(t, env, "run", helloDir(t), "--workdir", t.TempDir(), "--quiet")
		if code != 0 || !strings.Contains(stderr, "warning: tracing off") || !strings.Contains(stderr, strings.SplitN(env[len(env)-1], "=", 2)[1]) {
			t.Errorf("%v: exit %d\n%s", env, code, stderr)
		}
	}
}

// TestConsoleExporterAfterProgress: console spans are JSON lines on stderr,
// after the run's summary.
func TestConsoleExporterAfterProgress(t *testing.T) {
	code, _, stderr := runTracedCLI(t, []string{"OTEL_TRACES_EXPORTER=console"}, "run", helloDir(t), "--workdir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	summary := strings.Index(stderr, "COMPLETED")
	first := strings.Index(stderr, `{"Name":`)
	if summary < 0 || first < summary || !strings.Contains(stderr, `"Name":"capstan.run"`) {
		t.Fatalf("console spans not after the summary:\n%s", stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr[first:]), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("not a JSON line: %s", line)
		}
	}
}

// TestJournalSameWithTracing: tracing changes nothing in the journal but
// times, ids and durations.
func TestJournalSameWithTracing(t *testing.T) {
	sink, url := newOTLPSink(t)
	var journals []string
	for _, env := range [][]string{nil, {"OTEL_EXPORTER_OTLP_ENDPOINT=" + url}} {
		wd := t.TempDir()
		if code, _, stderr := runTracedCLI(t, env, "run", helloDir(t), "--workdir", wd, "--quiet"); code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		journals = append(journals, normalizeJournal(t, strings.ReplaceAll(readJournal(t, wd), wd, "WD")))
	}
	if len(sink.take()) == 0 {
		t.Fatal("the traced run exported no spans")
	}
	if journals[0] != journals[1] {
		t.Fatalf("journals differ:\n--- off\n%s\n--- on\n%s", journals[0], journals[1])
	}
}

func readJournal(t *testing.T, wd string) string {
	t.Helper()
	m := runJournals(t, wd)
	if len(m) != 1 {
		t.Fatalf("%d journals in %s", len(m), wd)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var runIDPattern = regexp.MustCompile(`\d{8}T\d{6}Z-[0-9a-f]{6}`)

// normalizeJournal drops what differs between any two runs: timestamps,
// durations, run and session ids.
func normalizeJournal(t *testing.T, text string) string {
	t.Helper()
	volatile := map[string]bool{"time": true, "prev": true, "journal": true, "duration_ms": true, "durationMs": true, "session_id": true, "sessionId": true, "timestamp": true}
	var scrub func(v any) any
	scrub = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				if volatile[k] {
					x[k] = "*"
				} else {
					x[k] = scrub(vv)
				}
			}
		case []any:
			for i := range x {
				x[i] = scrub(x[i])
			}
		}
		return v
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(runIDPattern.ReplaceAllString(text, "RUN")), "\n") {
		var v any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(scrub(v))
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}
