package tracing

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The exporter posts a protobuf TracesData (wire-compatible with the
// collector's ExportTraceServiceRequest) carrying the span and the
// resource, gzip-compressed when asked, and retries a 503.
func TestExportBodyCompressionRetry(t *testing.T) {
	var calls atomic.Int32
	got := make(chan *tracepb.TracesData, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("headers %v", r.Header)
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		b, _ := io.ReadAll(zr)
		var td tracepb.TracesData
		if err := proto.Unmarshal(b, &td); err != nil {
			t.Error(err)
		}
		got <- &td
	}))
	defer srv.Close()
	tr, _, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_SERVICE_NAME": "svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tr.Provider().Tracer("test").Start(context.Background(), "the-span")
	sp.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	td := <-got
	rs := td.ResourceSpans[0]
	if name := rs.ScopeSpans[0].Spans[0].Name; name != "the-span" {
		t.Errorf("span %q", name)
	}
	found := false
	for _, a := range rs.Resource.Attributes {
		found = found || a.Key == "service.name" && a.Value.GetStringValue() == "svc"
	}
	if !found || calls.Load() != 2 {
		t.Errorf("service.name found %v, calls %d", found, calls.Load())
	}
}

// A collector that rejects the spans is reported once by Shutdown, without
// the endpoint URL (it may carry credentials).
func TestExportRejected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad spans", http.StatusBadRequest)
	}))
	defer srv.Close()
	tr, _, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": strings.Replace(srv.URL, "http://", "http://user:pw@", 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tr.Provider().Tracer("test").Start(context.Background(), "s")
	sp.End()
	err = tr.Shutdown(context.Background())
	if err == nil || !strings.Contains(err.Error(), "400 Bad Request: bad spans") || strings.Contains(err.Error(), "pw") {
		t.Fatalf("Shutdown = %v", err)
	}
}

func TestExporterSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:1"
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "OTEL_EXPORTER_OTLP_TIMEOUT=soon: want a positive number of milliseconds"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=zstd: use gzip or none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": notPEM}, "no PEM certificate"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": filepath.Join(dir, "missing.pem")}, "OTEL_EXPORTER_OTLP_CERTIFICATE: open"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_KEY": notPEM}, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY must be set together"},
	} {
		tc.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = base
		tr, _, err := setup(t, tc.env, nil)
		if tr != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: Setup = %v, %v; want %q", tc.env, tr, err, tc.want)
		}
	}
	// A per-request timeout is honoured: a collector that never answers
	// costs the timeout, not the whole shutdown budget per attempt.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(300 * time.Millisecond) }))
	defer hang.Close()
	tr, _, err := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": hang.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tr.Provider().Tracer("test").Start(context.Background(), "s")
	sp.End()
	if err := tr.Shutdown(context.Background()); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Shutdown = %v", err)
	}
}
