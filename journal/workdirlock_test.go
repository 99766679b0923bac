package journal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// deadPID is the pid of a process that has ended and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A lock whose holder has ended but is still held a moment longer (by a
// process the killed run was starting) is taken once it is let go; a
// live holder's is refused at once, naming it.
func TestWorkDirLockOfAnEndedHolder(t *testing.T) {
	store := Store{Dir: t.TempDir()}
	wd := t.TempDir()
	held, err := store.LockWorkDir(wd)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := store.WorkDirRuns(wd)
	path := filepath.Join(dir, "lock")

	// A live holder (this process): busy at once.
	start := time.Now()
	_, err = store.LockWorkDir(wd)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.PID != os.Getpid() {
		t.Fatalf("lock held by a live process: %v", err)
	}
	if waited := time.Since(start); waited >= releaseWait {
		t.Fatalf("waited %v for a live holder", waited)
	}

	// The file names a process that has ended; the lock goes a moment
	// later.
	if err := os.WriteFile(path, []byte(fmt.Sprintf("run=20261207T000000Z-abcdef pid=%d since=x\n", deadPID(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		held.Unlock()
	}()
	l, err := store.LockWorkDir(wd)
	if err != nil {
		t.Fatalf("the lock of an ended holder was not taken once let go: %v", err)
	}
	l.Unlock()

	// A lock file that names nobody (its holder cleared the note and is
	// letting go, or took the lock and has not written it yet) is waited
	// for too, not refused.
	again, err := store.LockWorkDir(wd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		again.Unlock()
	}()
	l, err = store.LockWorkDir(wd)
	if err != nil {
		t.Fatalf("a lock whose note is empty was not taken once let go: %v", err)
	}
	l.Unlock()
}
