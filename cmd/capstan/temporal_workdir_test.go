package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/temporaltest"
)

// A --workdir that exists only where the workers run is not refused by
// run --temporal or submit; when the worker does not have it either, the
// run's failure reaches the user as a capstan error with its code and what
// to do, not Temporal's chain of wrapped errors: run --temporal exits 2
// with it, and the command submit prints lists it.
func TestTemporalWorkDirTheWorkerLacks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and a worker process; run without -short")
	}
	addr := temporaltest.Server(t)
	startWorker(t, addr, t.TempDir())
	dir := sleepingAgent(t, 0)
	missing := filepath.Join(t.TempDir(), "only on the workers")
	raw := []string{"workflow execution error", "activity error", "(type: ", "retryable"}

	sh := pasteShell(t, t.TempDir())
	code, out := sh("capstan run " + shellQuote(dir) + " --temporal " + addr + " --workdir " + shellQuote(missing) + " --who Ada")
	if code != exitUsage || !strings.Contains(out, "not on this machine: the worker must have it") ||
		!strings.Contains(out, "CONFIG_INVALID: run ") || !strings.Contains(out, "is not a directory on the worker") || !strings.Contains(out, "; hint: pass --workdir") {
		t.Fatalf("run --temporal: exit %d, want %d\n%s", code, exitUsage, out)
	}
	for _, r := range raw {
		if strings.Contains(out, r) {
			t.Errorf("run --temporal prints Temporal's %q:\n%s", r, out)
		}
	}

	code, out = sh("capstan submit " + shellQuote(dir) + " --temporal " + addr + " --workdir " + shellQuote(missing) + " --who Ada")
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	list := pastedCommand(t, out, "see why a run failed with: ")
	id := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out = sh(list)
		if code == 0 && strings.Contains(out, "CONFIG_INVALID: run "+id+" failed on its worker") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: exit %d, no failure of run %s\n%s", list, code, id, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, r := range raw {
		if strings.Contains(out, r) {
			t.Errorf("runs --temporal prints Temporal's %q:\n%s", r, out)
		}
	}
}
