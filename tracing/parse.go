package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracesPath is where an OTLP/HTTP receiver takes spans, relative to the
// base URL of OTEL_EXPORTER_OTLP_ENDPOINT.
const tracesPath = "v1/traces"

// tracesURL is the URL spans are posted to, resolved the way the
// OpenTelemetry specification resolves the two endpoint variables: the
// signal-specific OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is (an
// empty path is "/"), the generic OTEL_EXPORTER_OTLP_ENDPOINT is a base URL
// that gets v1/traces appended. "" means neither is set (the exporter's
// default, http://localhost:4318/v1/traces). The note is a warning for a
// base URL that already ends in /v1/traces.
func tracesURL(env func(string) string) (u, note string, err error) {
	if v := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		p, err := parseEndpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v)
		if err != nil {
			return "", "", err
		}
		if p.Path == "" {
			p.Path = "/"
		}
		return p.String(), "", nil
	}
	v := env("OTEL_EXPORTER_OTLP_ENDPOINT")
	if v == "" {
		return "", "", nil
	}
	p, err := parseEndpoint("OTEL_EXPORTER_OTLP_ENDPOINT", v)
	if err != nil {
		return "", "", err
	}
	if strings.HasSuffix(strings.TrimSuffix(p.Path, "/"), "/"+tracesPath) {
		note = "OTEL_EXPORTER_OTLP_ENDPOINT is a base URL and already ends in /" + tracesPath +
			", so spans go to " + path.Join("/", p.Path, tracesPath) +
			"; set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT instead to give the full URL"
	}
	p.Path = path.Join("/", p.Path, tracesPath)
	p.RawPath = ""
	return p.String(), note, nil
}

// parseEndpoint accepts an http or https URL with a host. The value is not
// quoted in the error: a URL can carry credentials.
func parseEndpoint(name, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid URL", name)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s must be an http:// or https:// URL with a host (such as http://localhost:4318)", name)
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// parseKeyValues parses a list of key=value pairs separated by commas, the
// format of OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES: spaces
// around keys and values are trimmed and values are percent-decoded. A
// malformed entry is skipped and reported by its position, never by its
// content (header values are API keys). Empty entries are ignored.
func parseKeyValues(name, s string) (map[string]string, []string) {
	out := map[string]string{}
	var problems []string
	for i, entry := range strings.Split(s, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		var problem string
		switch {
		case !ok:
			problem = "has no '='"
		case !validKey(k):
			problem = "has an empty key or a key that is not an HTTP token"
		default:
			dv, err := url.PathUnescape(v)
			dv = strings.TrimSpace(dv)
			switch {
			case err != nil:
				problem = "has an invalid %-escape in its value"
			case !validValue(dv):
				problem = "has a control character in its value"
			default:
				out[k] = dv
			}
		}
		if problem != "" {
			problems = append(problems, fmt.Sprintf("%s: entry %d %s; it is ignored", name, i+1, problem))
		}
	}
	return out, problems
}

// validKey reports whether k is a non-empty RFC 9110 token (the header
// names the OpenTelemetry specification allows).
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue reports whether v can be sent as an HTTP header value (no
// control characters but tab).
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// errTraceparent is the warning for a TRACEPARENT that is set but not a
// valid W3C trace context.
var errTraceparent = errors.New("TRACEPARENT is not a valid W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>); the run's spans start a new trace")

// parseTraceparent reads a W3C traceparent (and tracestate) into the
// remote span context a run joins. An invalid traceparent is an error; an
// invalid tracestate is dropped, as the W3C specification says.
func parseTraceparent(tp, ts string) (trace.SpanContext, error) {
	carrier := propagation.MapCarrier{"traceparent": tp}
	if ts != "" {
		carrier["tracestate"] = ts
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	if !sc.IsValid() {
		return trace.SpanContext{}, errTraceparent
	}
	return sc, nil
}
