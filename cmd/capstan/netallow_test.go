package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// countingServer is a loopback HTTP server answering body and counting
// the requests that reached it.
func countingServer(t *testing.T, body string) (hostport string, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), hits
}

// needCurl skips t without curl, or fails it in CI (which installs it).
func needCurl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI needs curl")
		}
		t.Skip("curl is not installed")
	}
}

// runProbe runs the agent of networkAgent in wd and returns its journal,
// which must show the probe ran to its end ("PROBE-END").
func runProbe(t *testing.T, dir, wd string) string {
	t.Helper()
	if code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	text, err := os.ReadFile(runJournals(t, wd)[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "PROBE-END") {
		t.Fatalf("the probe did not run:\n%s", text)
	}
	return string(text)
}

// networkAgent is an agent whose scripted model runs command in Bash, with
// network as runner.boundaries.sandbox.network.
func networkAgent(t *testing.T, network, command string) string {
	t.Helper()
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "net", "description": "reaches out",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "default", "sandbox": {"network": ` + network + `}}}}`,
		"steps_registry.json":                  `{"agentId": "net", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Fetch.",
		"script.yaml":                          "turns:\n  - tool_calls: [{name: Bash, input: {command: " + jsonString(command) + "}}]\n  - text: \"ALL_DONE\"\n",
	})
}

// TestSandboxNetworkAllowList: a sandboxed agent whose network allow-list
// names one loopback server reaches it (plain HTTP and an HTTPS-style
// CONNECT tunnel), never the other loopback server, and reaches nothing
// when it ignores the proxy variables; a bad entry is refused by validate.
func TestSandboxNetworkAllowList(t *testing.T) {
	needSandbox(t)
	needCurl(t)
	allowed, allowedHits := countingServer(t, "reached-the-allowed-server")
	other, otherHits := countingServer(t, "reached-the-other-server")
	probe := "curl -sS --max-time 10 http://" + allowed + "/; echo; curl -sS --max-time 10 --proxytunnel http://" + allowed + "/; echo; " +
		"curl -sS --max-time 10 http://" + other + "/; curl -sS --max-time 10 --proxytunnel http://" + other + "/; " +
		"curl -sS --max-time 5 --noproxy '*' http://" + allowed + "/ || echo DIRECT-FAILED; echo PROBE-END"
	dir, wd := networkAgent(t, `{"allow": ["`+allowed+`"]}`, probe), t.TempDir()
	journalText := runProbe(t, dir, wd)
	if got := strings.Count(journalText, "reached-the-allowed-server"); got < 2 || allowedHits.Load() != 2 {
		t.Errorf("the allowed server answered %d requests (journal shows %d), want 2 (plain and tunnelled)", allowedHits.Load(), got)
	}
	if otherHits.Load() != 0 || strings.Contains(journalText, "reached-the-other-server") {
		t.Errorf("a server that is not listed was reached %d times", otherHits.Load())
	}
	if !strings.Contains(journalText, "is not in runner.boundaries.sandbox.network.allow") || !strings.Contains(journalText, "DIRECT-FAILED") {
		t.Errorf("the refusal is not explained, or the direct connection did not fail:\n%s", journalText)
	}

	bad := networkAgent(t, `{"allow": ["https://`+allowed+`"]}`, "true")
	code, out, errOut := captureConfigCLI(t, "validate", bad)
	if code != exitUsage || !strings.Contains(out+errOut, "AC-SANDBOX-NETWORK") {
		t.Fatalf("validate of a bad allow entry: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestClimptTrustedDomainsBecomeTheAllowList: climpt's
// "network": {"mode": "custom", "trustedDomains": [...]} runs sandboxed
// with each domain as an allow-list pair at port 443 (an entry with a port
// as written): the proxy lets the tunnel to a trusted domain through
// (its dial then fails: .invalid does not resolve, 502) and refuses an
// untrusted one (403); a trusted loopback pair is reached. validate
// refuses a wildcard domain, naming the entry and the fix.
func TestClimptTrustedDomainsBecomeTheAllowList(t *testing.T) {
	needSandbox(t)
	needCurl(t)
	allowed, allowedHits := countingServer(t, "reached-the-trusted-server")
	probe := "curl -sS --max-time 10 http://" + allowed + "/; echo; " +
		"curl -sS --max-time 10 https://trusted.invalid/ 2>&1; echo; " +
		"curl -sS --max-time 10 https://untrusted.invalid/ 2>&1; echo PROBE-END"
	dir, wd := networkAgent(t, `{"mode": "custom", "trustedDomains": ["trusted.invalid", "`+allowed+`"]}`, probe), t.TempDir()
	if code, out, errOut := captureConfigCLI(t, "validate", dir); code != 0 {
		t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	journalText := runProbe(t, dir, wd)
	if allowedHits.Load() != 1 || !strings.Contains(journalText, "reached-the-trusted-server") {
		t.Errorf("the trusted loopback pair answered %d requests, want 1", allowedHits.Load())
	}
	if !strings.Contains(journalText, "response 502") || !strings.Contains(journalText, "response 403") {
		t.Errorf("want the trusted domain's tunnel let through (502: it does not resolve) and the untrusted one refused (403):\n%s", journalText)
	}

	bad := networkAgent(t, `{"mode": "custom", "trustedDomains": ["api.anthropic.com", "*.github.com"]}`, "true")
	code, out, errOut := captureConfigCLI(t, "validate", bad)
	if code != exitUsage || !strings.Contains(out+errOut, "AC-SANDBOX-NETWORK") ||
		!strings.Contains(out+errOut, "/runner/boundaries/sandbox/network/trustedDomains/1") || !strings.Contains(out+errOut, `"api.github.com"`) {
		t.Fatalf("validate of a wildcard domain: exit %d\n%s\n%s", code, out, errOut)
	}
}
