//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
)

func TestMain(m *testing.M) {
	seedHelperIfAsked()
	hideProcIfAsked()
	Init()
	os.Exit(m.Run())
}

var (
	runnerOnce sync.Once
	testRunner *Runner
)

// sharedRunner probes once for the whole test binary.
func sharedRunner(t *testing.T) *Runner {
	t.Helper()
	runnerOnce.Do(func() { testRunner = New(context.Background(), Config{}) })
	c := testRunner.Capabilities()
	if !c.Namespaces || c.LandlockABI == 0 {
		t.Skipf("sandbox unavailable here: %s (%s)", c.Reason, c.Hint)
	}
	return testRunner
}

// skillDir makes a skill root with a build/ directory and the given files.
func skillDir(t *testing.T, files map[string]string) (root, build string) {
	t.Helper()
	root = t.TempDir()
	build = filepath.Join(root, "build")
	if err := os.Mkdir(build, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, build
}

func runIn(t *testing.T, root, build string, argv []string, mod func(*Spec)) Result {
	t.Helper()
	spec := Spec{Argv: argv, Dir: root, Writable: []string{build}, Timeout: 20 * time.Second}
	if mod != nil {
		mod(&spec)
	}
	res, err := sharedRunner(t).Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestRunOK(t *testing.T) {
	root, build := skillDir(t, map[string]string{"x.sh": "read line; echo \"got:$line pwd:$(pwd)\"; echo err >&2; echo hi > build/out.txt\n"})
	res := runIn(t, root, build, []string{"bash", "x.sh"}, func(s *Spec) { s.Stdin = []byte("abc\n") })
	if res.Status != StatusOK {
		t.Fatalf("status %s reason %q stderr %q", res.Status, res.Reason, res.Stderr)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "got:abc pwd:"+root {
		t.Errorf("stdout %q", got)
	}
	if res.Stderr != "err" || res.StderrLines != 1 {
		t.Errorf("stderr %q (%d lines)", res.Stderr, res.StderrLines)
	}
	if b, err := os.ReadFile(filepath.Join(build, "out.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("build/out.txt = %q, %v", b, err)
	}
	if !res.Sandboxed {
		t.Error("not sandboxed")
	}
}

func TestNetworkDenied(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("LEAK\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// Sanity: the listener works from outside the sandbox.
	if c, err := net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	script := fmt.Sprintf(`import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", %d), timeout=3)
    print(s.recv(10).decode())
except OSError as e:
    print("blocked:", e.errno, file=sys.stderr)
    sys.exit(3)
`, port)
	root, build := skillDir(t, map[string]string{"net.py": script})
	res := runIn(t, root, build, []string{"python3", "net.py"}, nil)
	if res.Status != StatusExit || res.ExitCode != 3 || strings.Contains(string(res.Stdout), "LEAK") {
		t.Fatalf("network not blocked: status %s exit %d stdout %q stderr %q", res.Status, res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "blocked:") {
		t.Errorf("stderr %q", res.Stderr)
	}
}

func TestWriteOutsideBuildDenied(t *testing.T) {
	root, build := skillDir(t, map[string]string{})
	other := t.TempDir()
	for _, target := range []string{filepath.Join(root, "evil.txt"), filepath.Join(other, "evil.txt"), "/tmp/capstan-sandbox-evil.txt"} {
		res := runIn(t, root, build, []string{"bash", "-c", "echo x > " + target}, nil)
		if res.Status != StatusExit {
			t.Errorf("%s: status %s, want exit", target, res.Status)
		}
		if !strings.Contains(res.Stderr, "Permission denied") {
			t.Errorf("%s: stderr %q", target, res.Stderr)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written", target)
		}
	}
}

func TestReadOutsideRootDenied(t *testing.T) {
	other := t.TempDir()
	secret := filepath.Join(other, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOPSECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, build := skillDir(t, map[string]string{})
	if err := os.Symlink(secret, filepath.Join(root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{secret, "link.txt", "/root/.bashrc", "/etc/shadow", "/etc/gshadow", "/proc/1/environ"} {
		res := runIn(t, root, build, []string{"bash", "-c", "cat " + target}, nil)
		if res.Status == StatusOK || strings.Contains(string(res.Stdout), "TOPSECRET") {
			t.Errorf("%s readable: status %s stdout %q", target, res.Status, res.Stdout)
		}
	}
}

// A program reads what /proc says about itself (Node's
// process.memoryUsage() reads /proc/self/stat, and vitest's and jest's
// workers hang without it), from a /proc of the sandbox's own PID
// namespace: it lists the sandbox's processes only, and the sandbox's
// PID 1 (capstan's helper) keeps its environment and memory closed.
func TestProgramReadsItsOwnProc(t *testing.T) {
	root, build := skillDir(t, map[string]string{})
	host := 0
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				host++
			}
		}
	}
	script := `read -r stat < /proc/self/stat || exit 11
ls /proc/self/fd > /dev/null || exit 12
n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo "processes $n"
if cat /proc/1/environ 2>/dev/null; then exit 13; fi
if cat /proc/1/mem 2>/dev/null | head -c1 | grep -q .; then exit 14; fi
if echo 1 > /proc/sys/kernel/ns_last_pid 2>/dev/null; then exit 15; fi
exit 0`
	res := runIn(t, root, build, []string{"bash", "-c", script}, nil)
	if res.Status != StatusOK {
		t.Fatalf("status %s exit %d reason %q stderr %q", res.Status, res.ExitCode, res.Reason, res.Stderr)
	}
	var n int
	if _, err := fmt.Sscanf(string(res.Stdout), "processes %d", &n); err != nil {
		t.Fatalf("stdout %q: %v", res.Stdout, err)
	}
	// The helper, bash and the subshells of the script: a handful, where
	// the host's /proc lists every process of the machine.
	if n > 8 || (host > 20 && n >= host) {
		t.Errorf("the sandbox's /proc lists %d processes (the host's %d)", n, host)
	}
}

// TestForkBomb: a program that multiplies itself is stopped at the process
// limit. The bomb doubles at each of 6 levels (about 250 processes at
// most), far past the limit of 32 yet bounded: when capstan runs as root,
// RLIMIT_NPROC does not apply and only the watchdog stops the tree, and an
// unbounded bomb on a loaded machine could grow until other tests (and
// other processes of the machine) cannot fork.
func TestForkBomb(t *testing.T) {
	root, build := skillDir(t, map[string]string{"bomb.sh": "bomb() { if [ \"$1\" -gt 0 ]; then bomb $(($1-1)) & bomb $(($1-1)) & fi; sleep 5; }\nbomb 6\necho survived\n"})
	res := runIn(t, root, build, []string{"bash", "bomb.sh"}, func(s *Spec) {
		s.Limits.Processes = 32
		s.Timeout = 10 * time.Second
	})
	if !strings.Contains(res.Stderr, "Resource temporarily unavailable") && res.Status != StatusProcessLimit {
		t.Fatalf("fork bomb not limited: status %s stderr %q", res.Status, res.Stderr)
	}
}

func TestCPUSpin(t *testing.T) {
	root, build := skillDir(t, map[string]string{"spin.py": "while True:\n    pass\n"})
	// A generous wall clock: on a loaded machine CPU seconds accrue slowly.
	res := runIn(t, root, build, []string{"python3", "spin.py"}, func(s *Spec) { s.Limits.CPUSeconds = 1; s.Timeout = 120 * time.Second })
	if res.Status != StatusCPULimit {
		t.Fatalf("status %s reason %q", res.Status, res.Reason)
	}
	if !strings.Contains(res.Reason, "CPU time limit") {
		t.Errorf("reason %q", res.Reason)
	}
}

func TestWallClockTimeout(t *testing.T) {
	root, build := skillDir(t, map[string]string{})
	res := runIn(t, root, build, []string{"bash", "-c", "(sleep 30; echo late) & sleep 30"}, func(s *Spec) { s.Timeout = 500 * time.Millisecond })
	if res.Status != StatusTimeout || res.Duration > 5*time.Second {
		t.Fatalf("status %s after %s", res.Status, res.Duration)
	}
}

func TestMemoryHog(t *testing.T) {
	root, build := skillDir(t, map[string]string{"hog.py": "b = bytearray(2 * 1024 * 1024 * 1024)\nprint('allocated')\n"})
	res := runIn(t, root, build, []string{"python3", "hog.py"}, func(s *Spec) { s.Limits.AddressSpaceMB = 256 })
	if res.Status != StatusMemoryLimit {
		t.Fatalf("status %s reason %q stderr %q", res.Status, res.Reason, res.Stderr)
	}
	if strings.Contains(string(res.Stdout), "allocated") {
		t.Error("allocation succeeded")
	}
}

func TestOutputFlood(t *testing.T) {
	root, build := skillDir(t, map[string]string{})
	res := runIn(t, root, build, []string{"bash", "-c", "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}, func(s *Spec) { s.MaxStdout = 64 << 10 })
	if res.Status != StatusOutputLimit || !res.StdoutTruncated || len(res.Stdout) != 64<<10 {
		t.Fatalf("status %s truncated %v len %d", res.Status, res.StdoutTruncated, len(res.Stdout))
	}
}

func TestFileSizeLimit(t *testing.T) {
	root, build := skillDir(t, map[string]string{})
	res := runIn(t, root, build, []string{"bash", "-c", "head -c 3000000 /dev/zero > build/big.bin"}, func(s *Spec) { s.Limits.FileSizeMB = 1 })
	if res.Status != StatusFileTooLarge {
		t.Fatalf("status %s reason %q stderr %q", res.Status, res.Reason, res.Stderr)
	}
	if fi, err := os.Stat(filepath.Join(build, "big.bin")); err == nil && fi.Size() > 1<<20 {
		t.Errorf("file grew to %d bytes", fi.Size())
	}
}

func TestUnavailableRefuses(t *testing.T) {
	r := New(context.Background(), Config{Capabilities: &Capabilities{Reason: "test says no", Hint: "enable it", LandlockABI: 7}})
	_, err := r.Run(context.Background(), Spec{Argv: []string{"true"}, Dir: t.TempDir()})
	if !errors.Is(err, agenterr.ErrSandboxUnavailable) {
		t.Fatalf("err = %v, want SANDBOX_UNAVAILABLE", err)
	}
	if e := agenterr.From(err); e.Hint != "enable it" {
		t.Errorf("hint %q", e.Hint)
	}
}

// TestUnavailableNamesWhatIsMissing: a machine without Landlock cannot
// sandbox even when it has namespaces, and the error names both parts
// that are missing, each with the setting to change.
func TestUnavailableNamesWhatIsMissing(t *testing.T) {
	noLandlock := Capabilities{Namespaces: true}
	e := agenterr.From(noLandlock.Unavailable())
	if e == nil || e.Code != agenterr.CodeSandboxUnavailable || !strings.Contains(e.Message, "Landlock is not available") ||
		!strings.Contains(e.Hint, "CONFIG_SECURITY_LANDLOCK") {
		t.Fatalf("no Landlock: %v", e)
	}
	neither := Capabilities{Reason: "user namespaces are disabled", Hint: "sysctl -w user.max_user_namespaces=15000"}
	e = agenterr.From(neither.Unavailable())
	if e == nil || !strings.Contains(e.Message, "user namespaces are disabled; Landlock is not available") ||
		!strings.Contains(e.Hint, "max_user_namespaces") || !strings.Contains(e.Hint, "CONFIG_SECURITY_LANDLOCK") {
		t.Fatalf("neither: %v", e)
	}
	if (Capabilities{Namespaces: true, LandlockABI: 4}).Unavailable() != nil {
		t.Error("a machine with both can sandbox")
	}
}

func TestProbeReportsLandlock(t *testing.T) {
	c := sharedRunner(t).Capabilities()
	if c.LandlockABI < 1 || !c.Namespaces || c.Unavailable() != nil {
		t.Errorf("%+v", c)
	}
}

func TestSetupErrorIsClassified(t *testing.T) {
	in := classifyInput{haveStatus: true, status: helperStatus{ExitCode: setupExit, Started: true}, stderr: setupMarker + "landlock: boom\n", limits: defaultLimits}
	var r Result
	classify(&r, in)
	if r.Status != StatusSandboxError || !strings.Contains(r.Reason, "landlock: boom") {
		t.Errorf("%+v", r)
	}
}

func TestNetworkOptIn(t *testing.T) {
	sharedRunner(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HELLO\n"))
			c.Close()
		}
	}()
	r := New(context.Background(), Config{Network: true, Capabilities: ptr(testRunner.Capabilities())})
	root, build := skillDir(t, map[string]string{"net.py": fmt.Sprintf("import socket\ns = socket.create_connection(('127.0.0.1', %d), timeout=3)\nprint(s.recv(10).decode().strip())\n", ln.Addr().(*net.TCPAddr).Port)})
	res, err := r.Run(context.Background(), Spec{Argv: []string{"python3", "net.py"}, Dir: root, Writable: []string{build}, Timeout: 20 * time.Second})
	if err != nil || res.Status != StatusOK || strings.TrimSpace(string(res.Stdout)) != "HELLO" {
		t.Fatalf("network opt-in: %v %s %q %q", err, res.Status, res.Stdout, res.Stderr)
	}
	for _, iso := range res.Isolation {
		if iso == "netns" {
			t.Error("netns listed although network is allowed")
		}
	}
	// Files stay confined.
	res, _ = r.Run(context.Background(), Spec{Argv: []string{"bash", "-c", "echo x > " + filepath.Join(root, "evil")}, Dir: root, Writable: []string{build}})
	if res.Status == StatusOK {
		t.Error("write outside build/ allowed with network opt-in")
	}
}

func ptr[T any](v T) *T { return &v }

func TestDegradedModeKeepsLandlockAndLimits(t *testing.T) {
	caps := sharedRunner(t).Capabilities()
	caps.Namespaces = false
	caps.Reason = "simulated: user namespaces disabled"
	r := New(context.Background(), Config{Capabilities: &caps, AllowUnsandboxed: true})
	root, build := skillDir(t, map[string]string{})
	res, err := r.Run(context.Background(), Spec{Argv: []string{"bash", "-c", "echo ok > build/x && echo x > evil"}, Dir: root, Writable: []string{build}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sandboxed || res.Status != StatusExit || !strings.Contains(res.Stderr, "Permission denied") {
		t.Errorf("%+v", res)
	}
	if _, err := os.Stat(filepath.Join(build, "x")); err != nil {
		t.Error("build/x not written")
	}
	for _, iso := range res.Isolation {
		if iso == "netns" || iso == "userns" {
			t.Errorf("isolation %v claims namespaces", res.Isolation)
		}
	}
	// Without the opt-out the same capabilities refuse.
	r2 := New(context.Background(), Config{Capabilities: &caps})
	if _, err := r2.Run(context.Background(), Spec{Argv: []string{"true"}, Dir: root}); !errors.Is(err, agenterr.ErrSandboxUnavailable) {
		t.Errorf("err %v", err)
	}
}

func TestExplainStartError(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{
		syscall.ENOSPC: "max_user_namespaces",
		syscall.EPERM:  "apparmor_restrict_unprivileged_userns",
		syscall.EACCES: "unprivileged_userns_clone",
		syscall.EINVAL: "CONFIG_USER_NS",
	} {
		reason, hint := explainStartError(&os.SyscallError{Syscall: "fork/exec", Err: errno})
		if reason == "" || !strings.Contains(hint, want) || strings.Contains(reason, "no space left") && !strings.Contains(reason, "disabled") {
			t.Errorf("%v: %q / %q", errno, reason, hint)
		}
	}
}

func TestNoProcessOutlivesRun(t *testing.T) {
	root, build := skillDir(t, map[string]string{})
	marker := fmt.Sprintf("%d", 4000+time.Now().UnixNano()%1000)
	res := runIn(t, root, build, []string{"bash", "-c", "setsid sleep " + marker + " & (sleep " + marker + " &) ; nohup sleep " + marker + " >/dev/null 2>&1 & echo started"}, nil)
	if res.Status != StatusOK || strings.TrimSpace(string(res.Stdout)) != "started" {
		t.Fatalf("%s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// The tree is killed with SIGKILL when the run ends; a killed process
	// may take a moment to exit on a loaded machine, so the check waits
	// (up to a bound) for the sleepers to be gone.
	var survivors []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		survivors = survivors[:0]
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(b), "sleep\x00"+marker) {
				survivors = append(survivors, p)
			}
		}
		if len(survivors) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(survivors) > 0 {
		t.Errorf("processes survived the run: %v", survivors)
	}
}

// TestLargeEnvUnderAddressSpaceLimit is the regression test for a helper
// that died with "fatal error: runtime: out of memory" in CI: under -race the
// helper's address space is already far above RLIMIT_AS, so any allocation
// between setting the limits and execve (syscall.Exec builds C strings) had
// to map a page and could not. A large environment makes that allocation
// certain; the helper must still exec the target.
func TestLargeEnvUnderAddressSpaceLimit(t *testing.T) {
	root, build := skillDir(t, map[string]string{"x.sh": "echo \"${#BIG_0} ${#BIG_99}\"\n"})
	big := strings.Repeat("x", 8<<10)
	var env []string
	for i := 0; i < 100; i++ {
		env = append(env, fmt.Sprintf("BIG_%d=%s", i, big))
	}
	for i := 0; i < 5; i++ {
		res := runIn(t, root, build, []string{"bash", "x.sh"}, func(s *Spec) {
			s.Env = env
			s.Limits.AddressSpaceMB = 256
		})
		if res.Status != StatusOK {
			t.Fatalf("run %d: status %s reason %q stderr %q", i, res.Status, res.Reason, res.Stderr)
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != "8192 8192" {
			t.Fatalf("run %d: stdout %q", i, got)
		}
	}
}

// TestOversizedArgumentIsAToolInputError: what execve would refuse with
// E2BIG is refused before the helper starts, with a message the model can
// act on.
func TestOversizedArgumentIsAToolInputError(t *testing.T) {
	r := sharedRunner(t)
	root, build := skillDir(t, nil)
	for name, mod := range map[string]func(*Spec){
		"argument": func(s *Spec) { s.Argv = []string{"bash", "-c", "true #" + strings.Repeat("y", maxArgStrlen)} },
		"env":      func(s *Spec) { s.Env = []string{"HUGE=" + strings.Repeat("y", maxArgStrlen)} },
		"total": func(s *Spec) {
			for i := 0; i < execTotalLimit()/(64<<10)+1; i++ {
				s.Env = append(s.Env, fmt.Sprintf("V%d=%s", i, strings.Repeat("z", 64<<10)))
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			spec := Spec{Argv: []string{"true"}, Dir: root, Writable: []string{build}, Timeout: 5 * time.Second}
			mod(&spec)
			_, err := r.Run(context.Background(), spec)
			var ae *agenterr.Error
			if !errors.As(err, &ae) || ae.Code != agenterr.CodeToolInput || !ae.Recoverable {
				t.Fatalf("err = %v, want a recoverable %s", err, agenterr.CodeToolInput)
			}
			if !strings.Contains(err.Error(), "file") {
				t.Errorf("message gives no way out: %v", err)
			}
		})
	}
}

// TestExecFailureAfterLimitsIsReported: when execve itself fails (here a
// file with the exec bit that is no program), the helper reports it as a
// setup error without allocating under the address-space limit.
func TestExecFailureAfterLimitsIsReported(t *testing.T) {
	root, build := skillDir(t, nil)
	bad := filepath.Join(root, "not-a-program")
	if err := os.WriteFile(bad, []byte{0, 1, 2, 3, 'x'}, 0o755); err != nil {
		t.Fatal(err)
	}
	res := runIn(t, root, build, []string{bad}, func(s *Spec) { s.Limits.AddressSpaceMB = 256 })
	if res.Status != StatusSandboxError || !strings.Contains(res.Reason, "exec "+bad+": ") {
		t.Fatalf("status %s reason %q stderr %q", res.Status, res.Reason, res.Stderr)
	}
	if !strings.Contains(res.Reason, "exec format error") && !strings.Contains(res.Reason, "permission denied") {
		t.Errorf("reason %q names no execve error", res.Reason)
	}
}
