package scaleout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"golang.org/x/sys/unix"

	"github.com/capstan-dev/capstan/journal"
)

// ErrTypeHeld: another attempt of the run's iteration still holds the run
// (retryable: that attempt stops at its next heartbeat once Temporal has
// timed it out).
const ErrTypeHeld = "RUN_HELD"

// locksDir is the folder of the state directory that holds the runs'
// lock files.
const locksDir = "locks"

// lockPoll is how often a waiting attempt tries the run's lock again.
const lockPoll = 50 * time.Millisecond

// runLock is a worker's exclusive hold on a run: only the holder writes
// the run's journal and its checkout. It is an flock(2) lock on
// <state dir>/locks/<run id>.lock, so it holds between processes sharing
// the state directory (and between two attempts in one process), and the
// kernel drops it when its process dies.
type runLock struct{ f *os.File }

// lockRun takes the run's lock, waiting at most wait for an attempt that
// holds it — a zombie attempt Temporal timed out, which stops at its next
// heartbeat — and returns a retryable ErrTypeHeld failure naming the
// holder after that.
func lockRun(ctx context.Context, store journal.Store, queue, runID string, wait time.Duration) (*runLock, error) {
	if runID == "" || strings.ContainsAny(runID, `/\`) || runID == "." || runID == ".." {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("invalid run id %q", runID), ErrTypeBuild, nil)
	}
	dir := filepath.Join(store.Dir, locksDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, workDirError("create "+dir, err)
	}
	path := filepath.Join(dir, runID+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, workDirError("open the run's lock", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, workDirError("lock "+path, err)
		}
		if time.Now().After(deadline) {
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, temporal.NewApplicationError(fmt.Sprintf(
				"run %s is still held by an earlier attempt of its iteration (%s) after %s; it stops at its next heartbeat — if that worker is frozen, stop it (its lock is %s)",
				runID, strings.TrimSpace(string(holder)), wait, path), ErrTypeHeld)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(lockPoll):
		}
	}
	host, _ := os.Hostname()
	note := fmt.Sprintf("worker %s, pid %d on %s, since %s\n", queue, os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(note), 0)
	}
	return &runLock{f: f}, nil
}

// unlock releases the run.
func (l *runLock) unlock() {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
}

// journalMark is what a worker remembers of a run's journal after its
// iteration, to tell later whether anyone else wrote it since.
type journalMark struct{ fi os.FileInfo }

// markJournal records the journal at path as the worker leaves it.
func markJournal(path string) (journalMark, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return journalMark{}, false
	}
	return journalMark{fi: fi}, true
}

// unchanged reports whether the journal at path is still the file, and
// the length, the worker left.
func (m journalMark) unchanged(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && m.fi != nil && os.SameFile(fi, m.fi) && fi.Size() == m.fi.Size()
}
