//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// loopbackServer answers every request with body.
func loopbackServer(t *testing.T, body string) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	t.Cleanup(srv.Close)
	return srv, strings.TrimPrefix(srv.URL, "http://")
}

func TestNetworkAllowListReachesOnlyListedPairs(t *testing.T) {
	sharedRunner(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	_, allowed := loopbackServer(t, "ALLOWED")
	_, denied := loopbackServer(t, "DENIED")
	r := New(context.Background(), Config{NetworkAllow: []string{allowed}, Capabilities: ptr(testRunner.Capabilities())})
	root, build := skillDir(t, map[string]string{"x": ""})
	run := func(script string) Result {
		t.Helper()
		res, err := r.Run(context.Background(), Spec{Argv: []string{"bash", "-c", script}, Dir: root, Writable: []string{build},
			CombinedOutput: true, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Plain HTTP through the proxy, and a CONNECT tunnel (what HTTPS uses).
	for _, flags := range []string{"", "--proxytunnel"} {
		res := run("curl -sS --max-time 10 " + flags + " http://" + allowed + "/")
		if res.Status != StatusOK || strings.TrimSpace(string(res.Stdout)) != "ALLOWED" {
			t.Fatalf("allowed %s %q: %s %q", allowed, flags, res.Status, res.Stdout)
		}
		res = run("curl -sS --max-time 10 " + flags + " http://" + denied + "/")
		if strings.Contains(string(res.Stdout), "DENIED") {
			t.Fatalf("reached a pair that is not listed (%s %q): %q", denied, flags, res.Stdout)
		}
		if flags == "" && !strings.Contains(string(res.Stdout), "not in runner.boundaries.sandbox.network.allow") {
			t.Errorf("a refused request does not say why: %q", res.Stdout)
		}
	}
	// A program that ignores the proxy variables reaches nothing, not even
	// the allowed pair.
	res := run("curl -sS --max-time 5 --noproxy '*' http://" + allowed + "/")
	if res.Status == StatusOK || strings.Contains(string(res.Stdout), "ALLOWED") {
		t.Fatalf("a direct connection left the sandbox: %s %q", res.Status, res.Stdout)
	}
	hasIso := false
	for _, iso := range res.Isolation {
		hasIso = hasIso || iso == "net_allow_list"
	}
	if !hasIso {
		t.Errorf("isolation %v lacks net_allow_list", res.Isolation)
	}
}

func TestNetProxyRefusesAtTheSocket(t *testing.T) {
	_, allowed := loopbackServer(t, "x")
	a, err := newAllowList([]string{allowed})
	if err != nil {
		t.Fatal(err)
	}
	p := newNetProxy(a)
	defer p.Close()
	if _, err := p.dial(context.Background(), "tcp", "127.0.0.1:1"); err == nil {
		t.Fatal("dial of an unlisted address succeeded")
	}
	c, err := p.dial(context.Background(), "tcp", allowed)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	var _ net.Listener = proxyListener{p}
}
