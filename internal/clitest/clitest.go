// Package clitest holds the fixtures that capstan's command-line tests
// share across test packages: agent folders written into temporary
// directories and the journal store of the test binary's state directory
// (see package testenv).
package clitest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/journal"
)

// WriteFiles writes files (path relative to the directory: content) into
// a new temporary directory of t and returns it.
func WriteFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Store opens the journal store of the state directory the environment
// names (testenv.Run sets it for a test binary).
func Store(t testing.TB) journal.Store {
	t.Helper()
	store, err := journal.OpenStore(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// SleepingAgent is an agent folder (script provider) whose first iteration
// writes a file and whose second sleeps for the given seconds in Bash,
// then says ALL_DONE. It takes the parameter who.
func SleepingAgent(t testing.TB, seconds int) string {
	return WriteFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "slow", "description": "a slow second iteration",
  "parameters": {"who": {"type": "string", "description": "who", "required": true}},
  "runner": {"model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Write", "Bash(sleep:*)"], "permissionMode": "acceptEdits"}}}`,
		"steps_registry.json":                  `{"agentId": "slow", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Iteration {uv-iteration} for {uv-who}.",
		"script.yaml": fmt.Sprintf(`turns:
  - tool_calls: [{name: Write, input: {file_path: a.txt, content: "a"}}]
  - text: "iteration one done"
  - expect: {prompt_contains: ["Iteration 2 for Ada"]}
    tool_calls: [{name: Bash, input: {command: "sleep %d"}}]
  - text: "ALL_DONE"
`, seconds)})
}

// FakeKey is the API key the Temporal tests give their workers and
// submitters: it must never reach a workflow history or a journal.
const FakeKey = "sk-ant-api03-capstanTemporalSecret0123456789"

// Worker is a `capstan worker` process started by StartWorker.
type Worker struct {
	// Cmd is the worker's process.
	Cmd *exec.Cmd
	// Root is the directory of its work dirs.
	Root string
	// Stderr is what it printed on stderr so far.
	Stderr *SyncBuffer
	// Exited receives Cmd.Wait's error once; a test that takes it must
	// put it back for the cleanup.
	Exited chan error
}

// StartWorker starts `capstan worker` on the Temporal server at addr with
// its work dirs under root and FakeKey in its environment (cliCommand
// makes the capstan command of the test package), waits until it polls
// its task queue and stops it with SIGTERM (SIGKILL after 20 s) when the
// test ends.
func StartWorker(t testing.TB, cliCommand func(args ...string) *exec.Cmd, addr, root string, extra ...string) *Worker {
	t.Helper()
	cmd := cliCommand(append([]string{"worker", "--temporal", addr, "--work-root", root}, extra...)...)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "ANTHROPIC_API_KEY="+FakeKey)
	w := &Worker{Cmd: cmd, Root: root, Stderr: &SyncBuffer{}, Exited: make(chan error, 1)}
	w.Cmd.Stderr = w.Stderr
	if err := w.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.Exited <- w.Cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.Exited:
		case <-time.After(20 * time.Second):
			_ = w.Cmd.Process.Kill()
			<-w.Exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(w.Stderr.String(), "polling task queue") {
		select {
		case err := <-w.Exited:
			t.Fatalf("worker exited: %v\n%s", err, w.Stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker did not start:\n%s", w.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return w
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Git runs git with args in dir, with a fixed identity, and returns its
// trimmed output; a failure fails the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// ReadFile is the content of p, "" when it cannot be read.
func ReadFile(t testing.TB, p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

// ServeGit serves the bare repositories under base over git:// on a
// loopback port (pushes allowed) and returns the URL prefix. A remote is
// another machine: a push that a test kills along with a worker's process
// group must not kill the remote's side of it, which would leave its ref
// lock behind in the repository for good, as a file:// remote's
// receive-pack (a child of the killed push) does.
func ServeGit(t testing.TB, base string) string {
	t.Helper()
	daemon, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(daemon, "daemon", "--reuseaddr", "--listen=127.0.0.1", "--port="+strconv.Itoa(port),
			"--export-all", "--enable=receive-pack", "--base-path="+base, base)
		if err := cmd.Start(); err != nil {
			t.Fatalf("git daemon: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{} // the port was taken meanwhile: try another
				continue
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				prefix := fmt.Sprintf("git://%s/", addr)
				served.Store(prefix, base)
				return prefix
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatal("git daemon did not start")
	return ""
}

// served maps the URL prefixes ServeGit returned to the directories they
// serve.
var served sync.Map

// BarePath is the directory of the repository at url: one that ServeGit
// serves, or a file:// URL.
func BarePath(url string) string {
	path := strings.TrimPrefix(url, "file://")
	served.Range(func(prefix, base any) bool {
		if rest, ok := strings.CutPrefix(url, prefix.(string)); ok {
			path = filepath.Join(base.(string), rest)
			return false
		}
		return true
	})
	return path
}
