//go:build linux

package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const (
	childEnv    = "PROCGUARD_TEST_CHILD"
	secretValue = "sk-procguard-test-0123456789abcdef"
)

func TestMain(m *testing.M) {
	InitSupervisor()
	if os.Getenv(childEnv) != "" {
		os.Exit(protectedChild(os.Getenv(childEnv)))
	}
	os.Exit(m.Run())
}

// probeScript tries every way a command has to read its parent's
// environment or memory. $1 is the protected process's pid, $2 the secret
// to look for in its memory.
const probeScript = `
echo "== env"; env
echo "== self"; tr '\0' '\n' < /proc/self/environ
echo "== ppid"; tr '\0' '\n' < /proc/$PPID/environ 2>&1
echo "== pid"; tr '\0' '\n' < /proc/$1/environ 2>&1
echo "== mem"
python3 - "$1" "$2" <<'PY' 2>&1
import sys
pid, secret = sys.argv[1], sys.argv[2].encode()
try:
    maps = open(f"/proc/{pid}/maps").read().splitlines()
    mem = open(f"/proc/{pid}/mem", "rb")
except OSError as e:
    print("MEM-DENIED", e.strerror)
    sys.exit()
found = 0
for line in maps:
    f = line.split()
    if "r" not in f[1]:
        continue
    a, b = (int(x, 16) for x in f[0].split("-"))
    try:
        mem.seek(a)
        found += mem.read(b - a).count(secret)
    except OSError:
        pass
print("MEM-FOUND", found)
PY
echo "== fd7"; (echo leaked >&7) 2>&1 && echo "FD7-WRITABLE"
echo "== done"
`

// protectedChild is the process under test: it protects itself, then runs
// the probe in bash directly and under the supervisor, and prints both
// outputs.
func protectedChild(mode string) int {
	if mode == "protect" {
		rep, err := ProtectSelf(func(name, _ string) bool { return strings.HasSuffix(name, "_API_KEY") })
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			return 2
		}
		if len(rep.Wiped) != 1 || rep.Wiped[0] != "TEST_API_KEY" || !rep.NonDumpable {
			os.Stderr.WriteString("unexpected report\n")
			return 2
		}
	}
	if os.Getenv("TEST_API_KEY") != secretValue {
		os.Stderr.WriteString("os.Getenv lost the secret\n")
		return 2
	}
	pid := strconv.Itoa(os.Getpid())
	// The search string is built here so that the child's argv carries a
	// marker, not the secret's bytes in one piece.
	needle := secretValue[:12]
	direct := exec.Command("bash", "-c", probeScript, "probe", pid, needle)
	direct.Env = []string{"PATH=" + os.Getenv("PATH")}
	direct.Stdout, direct.Stderr = os.Stdout, os.Stdout
	_ = direct.Run()
	sup, err := Supervise(SupervisedSpec{Argv: []string{"bash", "-c", probeScript, "probe", pid, needle}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	sup.Cmd.Stdout, sup.Cmd.Stderr = os.Stdout, os.Stdout
	if err := sup.Start(); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	_ = sup.Cmd.Wait()
	return 0
}

// runChild starts the test binary as a capstan-like process with a secret
// in its environment and fd 7 open on a host file, in mode "protect" or
// "plain".
func runChild(t *testing.T, mode string) (out string, hostFile string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is required for the memory probe")
		}
		t.Skip("python3 not installed: the memory probe needs it")
	}
	hostFile = filepath.Join(t.TempDir(), "host-file")
	f, err := os.Create(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "TEST_API_KEY="+secretValue)
	// fds 3..7 in the child; 7 is the host file, inherited without
	// close-on-exec as a shell's 7>file would be.
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	cmd.ExtraFiles = []*os.File{null, null, null, null, f}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	return string(b), hostFile
}

// TestProtectKeepsSecretsFromChildren runs bash children of a protected
// process and checks that none of env, /proc/self/environ,
// /proc/$PPID/environ, /proc/<pid>/environ or /proc/<pid>/mem yields the
// secret, and that the inherited fd 7 does not reach them.
func TestProtectKeepsSecretsFromChildren(t *testing.T) {
	out, host := runChild(t, "protect")
	if strings.Contains(out, secretValue) {
		t.Errorf("a child read the secret:\n%s", out)
	}
	if strings.Count(out, "== done") != 2 {
		t.Fatalf("probe did not finish twice:\n%s", out)
	}
	if strings.Contains(out, "MEM-FOUND") || strings.Count(out, "MEM-DENIED") != 2 {
		t.Errorf("memory of the protected process was readable:\n%s", out)
	}
	if strings.Contains(out, "FD7-WRITABLE") {
		t.Errorf("inherited fd 7 reached a child:\n%s", out)
	}
	if b, _ := os.ReadFile(host); len(b) != 0 {
		t.Errorf("a child wrote the host file through fd 7: %q", b)
	}
}

// TestUnprotectedProcessLeaks shows what ProtectSelf prevents: the same probe
// against an unprotected process finds the secret and the descriptor.
func TestUnprotectedProcessLeaks(t *testing.T) {
	out, _ := runChild(t, "plain")
	if !strings.Contains(out, secretValue) || !strings.Contains(out, "FD7-WRITABLE") {
		t.Errorf("the probe no longer detects the leaks it guards against:\n%s", out)
	}
}

// TestSupervisorReapsEverything: a supervised command's setsid
// descendants are gone when Wait returns.
func TestSupervisorReapsEverything(t *testing.T) {
	dir := t.TempDir()
	sup, err := Supervise(SupervisedSpec{Argv: []string{"bash", "-c", "setsid -f sh -c 'echo $$ > p; exec sleep 300'; while [ ! -s p ]; do sleep 0.01; done"},
		Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	_ = sup.Cmd.Wait()
	if st := sup.Status(); !st.Started || st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	b, err := os.ReadFile(filepath.Join(dir, "p"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("descendant %d survived", pid)
	}
}
