package agentdir

import (
	"slices"
	"strings"
	"testing"
)

func TestParseNetworkAllow(t *testing.T) {
	good := map[string]string{
		"api.example.com:443": "api.example.com:443", "API.Example.COM.:443": "api.example.com:443",
		"127.0.0.1:8080": "127.0.0.1:8080", "[::1]:8443": "[::1]:8443", "localhost:1": "localhost:1",
	}
	for in, want := range good {
		if got, err := ParseNetworkAllow(in); err != nil || got != want {
			t.Errorf("ParseNetworkAllow(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "api.example.com", "https://api.example.com:443", "*.example.com:443", "api.example.com:0",
		"api.example.com:65536", "api.example.com:https", "::1:443", "[127.0.0.1]:80", "[host]:80", "a b:80", "a..b:80",
		"-a.b:80", "api.example.com:443/path", "user@host:22", ":443", "api.example.com:0443"} {
		if got, err := ParseNetworkAllow(in); err == nil {
			t.Errorf("ParseNetworkAllow(%q) = %q, want an error", in, got)
		}
	}
}

// FuzzParseNetworkAllow: an accepted entry's canonical form is accepted
// again unchanged, is host:port with a port in range, and carries no
// scheme, path or wildcard.
func FuzzParseNetworkAllow(f *testing.F) {
	for _, s := range []string{"api.example.com:443", "[::1]:8443", "127.0.0.1:8080", "*.x:1", "a:0", "http://a:1", "A.B.:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		c, err := ParseNetworkAllow(entry)
		if err != nil {
			return
		}
		again, err := ParseNetworkAllow(c)
		if err != nil || again != c {
			t.Fatalf("%q -> %q -> %q, %v", entry, c, again, err)
		}
		if strings.ContainsAny(c, "/*@?# ") {
			t.Fatalf("%q accepted as %q", entry, c)
		}
	})
}

// TestTrustedDomainsJoinTheAllowList: climpt's trustedDomains are
// allow-list pairs at port 443 (as written when they name a port), next
// to "allow"; with "mode": "none" they add nothing.
func TestTrustedDomainsJoinTheAllowList(t *testing.T) {
	sb := &Sandbox{Network: &SandboxNetwork{Allow: []string{"127.0.0.1:8080"}, Mode: "custom",
		TrustedDomains: []string{"api.anthropic.com", "registry.npmjs.org:8443", "::1"}}}
	want := []string{"127.0.0.1:8080", "api.anthropic.com:443", "registry.npmjs.org:8443", "[::1]:443"}
	if got := sb.AllowList(); !slices.Equal(got, want) {
		t.Fatalf("AllowList = %q, want %q", got, want)
	}
	for _, p := range want {
		if _, err := ParseNetworkAllow(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	sb.Network.Mode = "none"
	if got := sb.AllowList(); !slices.Equal(got, want[:1]) {
		t.Fatalf("mode none: AllowList = %q", got)
	}
}
