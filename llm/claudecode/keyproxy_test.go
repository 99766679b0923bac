package claudecode

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// The key proxy forwards only requests that carry the stand-in, with the
// real key in its place, and streams the answer through.
func TestKeyProxyPutsTheKeyBack(t *testing.T) {
	var seen []http.Header
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Clone())
		if r.URL.Path != "/gw/v1/messages" {
			http.Error(w, "path "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: ping\ndata: {}\n\n")
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL + "/gw")
	kp, err := startKeyProxy(target, map[string]string{"ANTHROPIC_API_KEY": "sk-real"})
	if err != nil {
		t.Fatal(err)
	}
	defer kp.Close()

	send := func(header, value string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", kp.URL()+"/v1/messages", strings.NewReader("{}"))
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ header, value string }{{"", ""}, {"X-Api-Key", "sk-real"}, {"X-Api-Key", kp.token + "x"}, {"Authorization", "Bearer wrong"}} {
		if code, _ := send(c.header, c.value); code != http.StatusUnauthorized {
			t.Errorf("%s %q: status %d, want 401", c.header, c.value, code)
		}
	}
	if len(seen) != 0 {
		t.Fatalf("refused requests reached the endpoint: %d", len(seen))
	}
	for _, c := range []struct{ header, value string }{{"X-Api-Key", kp.token}, {"Authorization", "Bearer " + kp.token}} {
		code, body := send(c.header, c.value)
		if code != http.StatusOK || !strings.Contains(body, "event: ping") {
			t.Fatalf("%s: status %d %q", c.header, code, body)
		}
	}
	for _, h := range seen {
		if h.Get("X-Api-Key") != "sk-real" || h.Get("Authorization") != "" {
			t.Errorf("forwarded headers: x-api-key %q, authorization %q", h.Get("X-Api-Key"), h.Get("Authorization"))
		}
	}
}

// The CLI's environment under the proxy: every credential is the
// stand-in and the base URL is the proxy's.
func TestKeyProxyStandIn(t *testing.T) {
	kp := &keyProxy{addr: "127.0.0.1:9", token: "capstan-stand-in-x"}
	env := kp.standIn([]string{"ANTHROPIC_API_KEY=sk-real", "ANTHROPIC_AUTH_TOKEN=tok", "ANTHROPIC_BASE_URL=https://gw.example", "PATH=/bin"})
	got := strings.Join(env, " ")
	if got != "ANTHROPIC_API_KEY=capstan-stand-in-x ANTHROPIC_AUTH_TOKEN=capstan-stand-in-x PATH=/bin ANTHROPIC_BASE_URL=http://127.0.0.1:9" {
		t.Fatalf("env = %s", got)
	}
	if keys := credentials([]string{"ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=tok"}); len(keys) != 1 || keys["ANTHROPIC_AUTH_TOKEN"] != "tok" {
		t.Fatalf("credentials = %v", keys)
	}
	if !viaCloudPlatform([]string{"CLAUDE_CODE_USE_BEDROCK=1"}) || viaCloudPlatform([]string{"CLAUDE_CODE_USE_VERTEX=0"}) {
		t.Fatal("viaCloudPlatform")
	}
}
