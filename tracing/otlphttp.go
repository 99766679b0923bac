package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/capstan-dev/capstan/internal/backoff"
)

// defaultTracesURL is where spans go when OTEL_TRACES_EXPORTER=otlp is set
// without an endpoint (the OTLP/HTTP default).
const defaultTracesURL = "http://localhost:4318/v1/traces"

// defaultExportTimeout is OTEL_EXPORTER_OTLP_TIMEOUT's default.
const defaultExportTimeout = 10 * time.Second

// httpClient posts OTLP/HTTP protobuf export requests. It is capstan's own
// because the upstream HTTP exporter's configuration package imports the
// gRPC runtime (and through it golang.org/x/net/trace and html/template),
// which would add megabytes and turn the linker's dead-method elimination
// off for the whole binary. The request body is a TracesData message,
// which the OTLP specification defines as wire-compatible with
// ExportTraceServiceRequest.
type httpClient struct {
	url      string
	headers  map[string]string
	gzip     bool
	timeout  time.Duration
	maxRetry time.Duration
	client   *http.Client
}

// newHTTPClient reads the remaining OTLP settings through env:
// OTEL_EXPORTER_OTLP_[TRACES_]{TIMEOUT,COMPRESSION,CERTIFICATE,
// CLIENT_CERTIFICATE,CLIENT_KEY}. A setting capstan cannot honour is an
// error naming the variable.
func newHTTPClient(env func(string) string, endpoint string, headers map[string]string, maxRetry time.Duration) (*httpClient, error) {
	get := func(name string) (string, string) {
		if v := env("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return "OTEL_EXPORTER_OTLP_TRACES_" + name, v
		}
		return "OTEL_EXPORTER_OTLP_" + name, env("OTEL_EXPORTER_OTLP_" + name)
	}
	c := &httpClient{url: endpoint, headers: headers, timeout: defaultExportTimeout, maxRetry: maxRetry}
	if c.url == "" {
		c.url = defaultTracesURL
	}
	if name, v := get("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s=%s: want a positive number of milliseconds", name, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch name, v := get("COMPRESSION"); strings.ToLower(v) {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("%s=%s: use gzip or none", name, v)
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if name, v := get("CERTIFICATE"); v != "" {
		pem, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%s: no PEM certificate in the file", name, v)
		}
		tlsConf.RootCAs = pool
	}
	certName, certFile := get("CLIENT_CERTIFICATE")
	keyName, keyFile := get("CLIENT_KEY")
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s / %s: %w", certName, keyName, err)
		}
		tlsConf.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, fmt.Errorf("%s and %s must be set together", certName, keyName)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConf
	c.client = &http.Client{Transport: transport}
	return c, nil
}

// Start implements otlptrace.Client.
func (c *httpClient) Start(context.Context) error { return nil }

// Stop implements otlptrace.Client.
func (c *httpClient) Stop(context.Context) error {
	c.client.CloseIdleConnections()
	return nil
}

// UploadTraces implements otlptrace.Client: one POST, retried with
// backoff on 429, 502, 503 and 504 (honouring Retry-After) for at most
// maxRetry or until ctx ends.
func (c *httpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: spans})
	if err != nil {
		return fmt.Errorf("encode spans: %w", err)
	}
	if c.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("compress spans: %w", err)
		}
		body = b.Bytes()
	}
	deadline := time.Now().Add(c.maxRetry)
	wait, backoffs := backoff.Exponential{Base: 200 * time.Millisecond, Max: time.Second}, 0
	for {
		retryAfter, err := c.post(ctx, body)
		if err == nil || retryAfter < 0 {
			return err
		}
		if retryAfter == 0 {
			backoffs++
			retryAfter = wait.Delay(backoffs, 0)
		}
		if time.Now().Add(retryAfter).After(deadline) {
			return err
		}
		if serr := backoff.Sleep(ctx, retryAfter); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// post sends one request. retryAfter < 0: do not retry; 0: retry after the
// backoff; > 0: retry after that long.
func (c *httpClient) post(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("OTLP request: %w", err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "capstan OTLP exporter")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// The URL may carry credentials: report the cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("OTLP export: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		var after time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return after, fmt.Errorf("OTLP export: collector answered %s", resp.Status)
	}
	return -1, fmt.Errorf("OTLP export: collector answered %s: %s", resp.Status, strings.ToValidUTF8(strings.TrimSpace(string(msg)), "?"))
}

var _ otlptrace.Client = (*httpClient)(nil)
