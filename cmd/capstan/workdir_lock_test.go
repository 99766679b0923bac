package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitForJournal waits until wd's one run journal holds text, and returns
// the run's id.
func waitForJournal(t *testing.T, wd, text string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if runs, err := testStore(t).List(wd); err == nil && len(runs) == 1 {
			if b, _ := os.ReadFile(runs[0].Path); strings.Contains(string(b), text) {
				return runs[0].ID
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no run journal of %s holds %q", wd, text)
	return ""
}

// A second run in a work dir where a run is working is refused (exit 2,
// WORKDIR_BUSY) naming the running run, whose printed show command works;
// once that run is killed, its lock is stale and the next run starts.
func TestSecondRunInABusyWorkDirIsRefused(t *testing.T) {
	dir, wd := sleepingAgent(t, 60), t.TempDir()
	first := cliCommand("run", dir, "--who", "Ada", "--workdir", wd, "--quiet")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-first.Process.Pid, syscall.SIGKILL); _ = first.Wait() }()
	id := waitForJournal(t, wd, `"type":"model.turn","iteration":2`)
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}

	code, _, errOut := capstanIn(t, t.TempDir(), nil, "run", hello, "--workdir", wd)
	if code != exitUsage || !strings.Contains(errOut, "WORKDIR_BUSY") || !strings.Contains(errOut, "run "+id+" (pid ") {
		t.Fatalf("second run: exit %d, want %d naming run %s\n%s", code, exitUsage, id, errOut)
	}
	show := "capstan show " + pastedCommand(t, errOut, "see it with: capstan show ")
	show = strings.TrimSuffix(show, ";")
	if i := strings.Index(show, ";"); i >= 0 {
		show = show[:i]
	}
	if code, out := pasteShell(t, t.TempDir())(show); code != 0 || !strings.Contains(out, "run "+id) {
		t.Fatalf("%s: exit %d\n%s", show, code, out)
	}

	// Killed, the first run leaves its lock file behind; the next run
	// takes it over.
	if err := syscall.Kill(-first.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if code, _, errOut := capstanIn(t, t.TempDir(), nil, "run", hello, "--workdir", wd, "-q"); code != 0 {
		t.Fatalf("run after the holder was killed: exit %d\n%s", code, errOut)
	}
}
