package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/proc"
)

// buildStdioServer builds tool/mcp's test server into a directory outside
// any work dir.
func buildStdioServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stdioserver")
	if out, err := testenv.GoCommand("build", "-o", bin, "../../tool/mcp/testdata/stdioserver").CombinedOutput(); err != nil {
		t.Fatalf("build the MCP server: %v\n%s", err, out)
	}
	return bin
}

// envFromJournal finds the text the server's "env" tool returned in the
// journal and returns the variable names in it.
func envFromJournal(t *testing.T, journalText string) []string {
	t.Helper()
	var found []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if found == nil && strings.Contains(v, "PATH=") && strings.Contains(v, "\nHOME=") || strings.HasPrefix(v, "HOME=") {
				for _, kv := range strings.Split(v, "\n") {
					k, _, _ := strings.Cut(kv, "=")
					found = append(found, k)
				}
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, line := range strings.Split(journalText, "\n") {
		var v any
		if json.Unmarshal([]byte(line), &v) == nil {
			walk(v)
		}
	}
	if found == nil {
		t.Fatalf("the server's environment is not in the journal:\n%s", journalText)
	}
	sort.Strings(found)
	return found
}

// TestMCPServerRunsInTheSandbox: a stdio MCP server the agent declares
// runs in the sandbox by default. Asked by the model, it cannot read a
// file outside its allowed paths, cannot connect to a loopback server,
// reaches the network allow-list's pair through the proxy, and its
// environment is the minimal base (no variable of capstan's own
// environment that the agent did not list). With --no-sandbox the same
// calls read the file and reach the server: what the sandbox prevents.
func TestMCPServerRunsInTheSandbox(t *testing.T) {
	needSandbox(t)
	bin := buildStdioServer(t)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("mcp-secret-c0ffee"), 0o600); err != nil {
		t.Fatal(err)
	}
	other, otherHits := countingServer(t, "reached-the-loopback-server")
	allowed, allowedHits := countingServer(t, "reached-the-allowed-server")
	t.Setenv("CAPSTAN_TEST_DB_PASSWORD", "pw-must-not-reach-the-server")
	script := `turns:
  - tool_calls:
      - {name: mcp__s__read, input: {path: ` + jsonString(secret) + `}}
      - {name: mcp__s__dial, input: {addr: "` + other + `"}}
      - {name: mcp__s__fetch, input: {url: "http://` + allowed + `/"}}
      - {name: mcp__s__env, input: {}}
  - text: "ALL_DONE"
`
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "mcpbox", "description": "asks its MCP server to escape",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "mcpServers": {"s": {"command": ` + jsonString(bin) + `}},
    "boundaries": {"allowedTools": ["mcp__s__read", "mcp__s__dial", "mcp__s__fetch", "mcp__s__env"],
      "sandbox": {"network": {"allow": ["` + allowed + `"]}}}}}`,
		"steps_registry.json":                  `{"agentId": "mcpbox", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Escape.",
		"script.yaml":                          script,
	})

	wd := t.TempDir()
	if code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd); code != 0 {
		t.Fatalf("sandboxed: exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(runJournals(t, wd)[0])
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.Contains(text, "mcp-secret-c0ffee") || !strings.Contains(text, "read failed") {
		t.Errorf("the sandboxed server read a file outside its allowed paths")
	}
	if otherHits.Load() != 0 || !strings.Contains(text, "dial failed") {
		t.Errorf("the sandboxed server connected to a loopback server (%d requests)", otherHits.Load())
	}
	if allowedHits.Load() != 1 || !strings.Contains(text, "200 OK: reached-the-allowed-server") {
		t.Errorf("the sandboxed server did not reach the allowed pair through the proxy (%d requests)", allowedHits.Load())
	}
	// The minimal base, the non-secret toolchain settings and the proxy
	// of the allow-list: nothing else.
	minimal := map[string]bool{"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true,
		"NO_PROXY": true, "http_proxy": true, "https_proxy": true, "all_proxy": true, "no_proxy": true}
	for _, k := range proc.BaseNames() {
		minimal[k] = true
	}
	for _, k := range envFromJournal(t, text) {
		if _, toolchain := proc.LookupToolchainVar(k); !minimal[k] && !toolchain && !strings.HasPrefix(k, "LC_") {
			t.Errorf("the server's environment holds %s, which is not in the minimal base", k)
		}
	}
	if strings.Contains(text, "pw-must-not-reach-the-server") {
		t.Error("a variable of capstan's environment reached the server")
	}

	// The control: unsandboxed, the same server does what the sandbox prevents.
	wd = t.TempDir()
	if code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd, "--no-sandbox"); code != 0 {
		t.Fatalf("--no-sandbox: exit %d\n%s\n%s", code, out, errOut)
	}
	b, _ = os.ReadFile(runJournals(t, wd)[0])
	if !strings.Contains(string(b), "mcp-secret-c0ffee") || otherHits.Load() == 0 {
		t.Errorf("unsandboxed, the server could not read the file or reach the server: the test proves nothing")
	}
}

// TestMCPServerInstalledOutsideTheReadablePathsStarts: stdio MCP servers
// installed outside the work dir and the system directories — one in a
// virtual environment (bin/server next to pyvenv.cfg, which runs the
// environment's lib/ program), one in a node_modules folder (.bin/srv, a
// link to a package's script that runs a program of a dependency beside
// it) — start sandboxed and answer: the sandbox reads their install
// roots, and the run says which. A file beside the install root stays
// unreadable.
func TestMCPServerInstalledOutsideTheReadablePathsStarts(t *testing.T) {
	needSandbox(t)
	bin := buildStdioServer(t)
	prefix := t.TempDir()
	secret := filepath.Join(prefix, "secret.txt")
	venv := filepath.Join(prefix, "venv")
	nm := filepath.Join(prefix, "proj", "node_modules")
	server, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for path, f := range map[string]struct {
		mode os.FileMode
		data []byte
	}{
		secret:                            {0o644, []byte("beside-the-install-c0ffee")},
		filepath.Join(venv, "pyvenv.cfg"): {0o644, []byte("home = /usr/bin\n")},
		filepath.Join(venv, "lib", "stdioserver"): {0o755, server},
		filepath.Join(venv, "bin", "server"):      {0o755, []byte("#!/bin/sh\nexec \"$(dirname \"$0\")/../lib/stdioserver\" \"$@\"\n")},
		filepath.Join(nm, "dep", "stdioserver"):   {0o755, server},
		filepath.Join(nm, "srv", "bin", "srv.sh"): {0o755, []byte("#!/bin/sh\nexec \"$(dirname \"$(readlink -f \"$0\")\")/../../dep/stdioserver\" \"$@\"\n")},
		filepath.Join(nm, "srv", "package.json"):  {0o644, []byte(`{"name": "srv", "bin": {"srv": "bin/srv.sh"}}`)},
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(nm, ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../srv/bin/srv.sh", filepath.Join(nm, ".bin", "srv")); err != nil {
		t.Fatal(err)
	}
	script := `turns:
  - tool_calls:
      - {name: mcp__v__greet, input: {name: "venv"}}
      - {name: mcp__n__greet, input: {name: "node"}}
      - {name: mcp__v__read, input: {path: ` + jsonString(secret) + `}}
  - text: "ALL_DONE"
`
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "mcpinstalled", "description": "MCP servers installed outside the work dir",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "mcpServers": {"v": {"command": ` + jsonString(filepath.Join(venv, "bin", "server")) + `},
      "n": {"command": ` + jsonString(filepath.Join(nm, ".bin", "srv")) + `}},
    "boundaries": {"allowedTools": ["mcp__v__greet", "mcp__n__greet", "mcp__v__read"]}}}`,
		"steps_registry.json":                  `{"agentId": "mcpinstalled", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Greet.",
		"script.yaml":                          script,
	})
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(runJournals(t, wd)[0])
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	wdBase := filepath.Base(wd)
	for _, want := range []string{", venv from " + wdBase, ", node from " + wdBase, "read failed",
		`MCP server \"v\": the sandbox lets it read its install as well, read-only: ` + venv,
		`MCP server \"n\": the sandbox lets it read its install as well, read-only: ` + nm} {
		if !strings.Contains(text, want) {
			t.Errorf("the journal lacks %q", want)
		}
	}
	if !strings.Contains(errOut+out, "MCP servers n, v: the sandbox lets them read their installs as well, read-only: n: "+nm+"; v: "+venv) {
		t.Errorf("the run's progress does not name the added paths:\n%s\n%s", out, errOut)
	}
	if strings.Contains(text, "beside-the-install-c0ffee") {
		t.Error("the sandboxed server read a file beside its install root")
	}
}
