package scaleout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/sandbox"
)

// sandboxedCounter is testdata/counter with its validator also requiring
// that secret cannot be read, and runner.boundaries.sandbox set to
// sandboxJS ("" leaves it off).
func sandboxedCounter(t *testing.T, secret, sandboxJS string) *agentdir.Agent {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "counter")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "counter"))); err != nil {
		t.Fatal(err)
	}
	edit := func(name, old, new string) {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("%s: %q not found (%v)", name, old, err)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("agent.json", `"maxTurns": 5`, `"maxTurns": 5`+sandboxJS)
	edit("steps_registry.json", `-eq 4"`, `-eq 4 && ! cat `+secret+`"`)
	def, err := agent.LoadPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// On a worker, as in a local run, an agent's command validators run in the
// sandbox by default: the counter completes although its validator passes
// only when a file outside the work dir cannot be read, and fails when the
// agent ("enabled": false) or the submission (--no-sandbox) opts out.
func TestWorkflowRunsValidatorsInTheAgentsSandbox(t *testing.T) {
	if err := sandbox.Probe(context.Background()).Unavailable(); err != nil {
		t.Skipf("no sandbox on this machine: %v", err)
	}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sandboxJS    string
		noSandbox, success bool
	}{{"sandboxed by default", "", false, true}, {"agent opts out", `, "sandbox": {"enabled": false}`, false, false},
		{"submission opts out", "", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			in, err := PrepareRun(context.Background(), Submission{Agent: sandboxedCounter(t, secret, c.sandboxJS), WorkDir: t.TempDir(), NoSandbox: c.noSandbox})
			if err != nil {
				t.Fatal(err)
			}
			res := newPool(t).run(t, in)
			if res.Success != c.success {
				t.Fatalf("success %v, want %v: %+v %+v", res.Success, c.success, res, res.Error)
			}
		})
	}
}
