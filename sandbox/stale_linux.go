//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ownerFile, in a temporary directory of a run (a build cache, its copies,
// a command's private HOME), names the process that made it: its pid and
// its start time, which tell it from a later process given the same pid.
const ownerFile = ".capstan-owner"

// staleTempPrefixes are the names of the temporary directories runs make
// in the system's temporary directory.
var staleTempPrefixes = []string{"capstan-cache-", "capstan-sbx-"}

// legacyStaleAge is how old a run's temporary directory without an owner
// file (made by a capstan before owner files) must be to be removed.
const legacyStaleAge = 24 * time.Hour

// markOwned writes dir's owner file: this process.
func markOwned(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), ownIdentity(), 0o600)
}

// ownIdentity is this process's owner-file content, read from /proc once
// (a process's pid and start time do not change).
var ownIdentity = sync.OnceValue(func() []byte { return []byte(processIdentity(os.Getpid()) + "\n") })

// processIdentity is "pid start-time" of a running process, "" when it
// does not run.
func processIdentity(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The fields after the command name (which may hold spaces and
	// parentheses): state is the first, the start time the 20th.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return strconv.Itoa(pid) + " " + f[19]
}

// RemoveStale removes the temporary directories that runs left in tmp
// (the system's temporary directory when "") when they were killed before
// they could remove them: build caches, their copies and commands' private
// HOMEs whose owner process is gone, and — from a capstan before owner
// files — those older than a day. Only real directories of this user are
// removed, never a symbolic link or another user's directory. It returns
// how many it removed.
func RemoveStale(tmp string) int {
	if tmp == "" {
		tmp = os.TempDir()
	}
	return removeStaleIn(tmp, staleTempPrefixes)
}

// removeStaleIn removes the directories of dir whose names start with one
// of prefixes and that RemoveStale counts as left over.
func removeStaleIn(tmp string, prefixes []string) int {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range entries {
		if !e.IsDir() || !hasPrefix(e.Name(), prefixes) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		if !staleDir(dir, fi) {
			continue
		}
		if removeTree(dir) == nil {
			removed++
		}
	}
	return removed
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// staleDir reports whether the run's temporary directory dir is left
// over: its owner does not run, or it has no owner file and is older than
// legacyStaleAge.
func staleDir(dir string, fi os.FileInfo) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return os.IsNotExist(err) && time.Since(fi.ModTime()) > legacyStaleAge
	}
	owner := strings.TrimSpace(string(b))
	pidText, _, _ := strings.Cut(owner, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false // not a file capstan wrote: leave the directory alone
	}
	return processIdentity(pid) != owner
}

// removeStaleSeedBuilds removes the directories in which a killed capstan
// was building the Go standard library's seed under root (see
// GoStdlibSeed): their owner does not run any more.
func removeStaleSeedBuilds(root string) { removeStaleIn(root, []string{seedBuildPrefix}) }

// endsWithCapstan makes cmd's process get SIGKILL when capstan dies, even
// by SIGKILL, so that a killed run does not leave it working.
func endsWithCapstan(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
