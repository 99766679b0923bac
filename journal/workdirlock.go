package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// WorkDirLock is a process's hold on a work dir: one run at a time works
// in it. It is an flock(2) lock on the work dir's lock file in the store
// (<state dir>/runs/<work dir key>/lock), which the kernel releases when
// the process ends however it ends — a lock file left by a killed run is
// stale and taken over, never mistaken for a running one. The file names
// the holder (pid, run id, since when) for the run it refuses.
type WorkDirLock struct {
	f     *os.File
	since string
}

// BusyError is the error of LockWorkDir when another process holds the
// work dir.
type BusyError struct {
	WorkDir string
	// RunID is the running run ("" when it has not got its id yet), PID
	// its process (0 when unknown), Since when it took the work dir.
	RunID string
	PID   int
	Since string
}

func (e *BusyError) Error() string {
	who := "another capstan run"
	if e.RunID != "" {
		who = "run " + e.RunID
	}
	if e.PID != 0 {
		who += fmt.Sprintf(" (pid %d", e.PID)
		if e.Since != "" {
			who += ", since " + e.Since
		}
		who += ")"
	}
	return fmt.Sprintf("work dir %s is busy: %s is running in it", e.WorkDir, who)
}

// LockWorkDir takes workDir's lock for this process, or returns a
// *BusyError naming the run that holds it.
func (s Store) LockWorkDir(workDir string) (*WorkDirLock, error) {
	dir, err := s.WorkDirRuns(workDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: open the work dir's lock: %w", err)
	}
	if err := flockHeld(f, path); err != nil {
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("journal: lock %s: %w", path, err)
		}
		abs, _ := filepath.Abs(workDir)
		busy := holder(path)
		busy.WorkDir = abs
		return nil, busy
	}
	l := &WorkDirLock{f: f, since: time.Now().UTC().Format(time.RFC3339)}
	l.write("")
	return l, nil
}

// releaseWait bounds how long LockWorkDir waits for a lock whose holder
// has ended: a process the killed holder was starting can keep the lock
// for the moment between its fork and its exec.
const releaseWait = 5 * time.Second

// flockHeld takes f's lock without blocking. While the lock is held but
// the process the lock file names has ended (a run killed with SIGKILL a
// moment ago), or the file names nobody (its holder is between taking
// the lock and writing its note, or between clearing the note and
// letting go), it tries again for up to releaseWait before it gives up
// with EWOULDBLOCK.
func flockHeld(f *os.File, path string) error {
	deadline := time.Now().Add(releaseWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		if pid := holder(path).PID; pid > 0 && unix.Kill(pid, 0) != unix.ESRCH {
			return err // a live holder (or one it cannot tell): busy
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holder reads who holds the lock from the lock file at path.
func holder(path string) *BusyError {
	busy := &BusyError{}
	b, _ := os.ReadFile(path)
	for _, field := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "run":
			busy.RunID = v
		case "pid":
			busy.PID, _ = strconv.Atoi(v)
		case "since":
			busy.Since = v
		}
	}
	return busy
}

// SetRun records the run id of the run that holds the lock, for the run
// a second one is refused with.
func (l *WorkDirLock) SetRun(runID string) { l.write(runID) }

func (l *WorkDirLock) write(runID string) {
	note := fmt.Sprintf("pid=%d since=%s", os.Getpid(), l.since)
	if runID != "" && validRunID(runID) {
		note = "run=" + runID + " " + note
	}
	if err := l.f.Truncate(0); err == nil {
		_, _ = l.f.WriteAt([]byte(note+"\n"), 0)
	}
}

// Unlock releases the work dir.
func (l *WorkDirLock) Unlock() {
	_ = l.f.Truncate(0)
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
}
