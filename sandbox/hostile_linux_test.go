//go:build linux

package sandbox

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needPython fails under CI (which installs python3) and skips elsewhere.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is required by the sandbox tests in CI")
		}
		t.Skip("python3 not installed")
	}
}

// TestInheritedFDDoesNotReachProgram: a descriptor capstan inherited
// without close-on-exec (a shell's 7>host-file) is not open in the
// sandboxed program.
func TestInheritedFDDoesNotReachProgram(t *testing.T) {
	root, build := skillDir(t, nil)
	host := filepath.Join(t.TempDir(), "host-file")
	f, err := os.Create(host)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd())) // dup(2): no close-on-exec
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	n := strconv.Itoa(fd)
	res := runIn(t, root, build, []string{"bash", "-c", "echo pwned >&" + n + " && echo WROTE"}, nil)
	if strings.Contains(string(res.Stdout), "WROTE") {
		t.Fatalf("the program wrote through inherited fd %s: %+v", n, res)
	}
	if b, _ := os.ReadFile(host); len(b) != 0 {
		t.Fatalf("host file written: %q", b)
	}
}

// TestUnixSocketsUnreachable: a path socket in a directory the program may
// not read (mode 0600, as a Docker socket or an ssh-agent is) and an
// abstract socket cannot be connected to.
func TestUnixSocketsUnreachable(t *testing.T) {
	needPython(t)
	if socketFilter() == nil {
		t.Skip("no seccomp filter for " + runtime.GOARCH + ": UNIX sockets are not blocked on this architecture (see docs/sandbox.md)")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	abstract, err := net.Listen("unix", "@capstan-test-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	accepted := make(chan struct{}, 2)
	for _, ln := range []net.Listener{l, abstract} {
		go func(ln net.Listener) {
			if c, err := ln.Accept(); err == nil {
				accepted <- struct{}{}
				c.Close()
			}
		}(ln)
	}
	root, build := skillDir(t, map[string]string{"connect.py": `import socket, sys
for addr in sys.argv[1:]:
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        print("CONNECTED", repr(addr))
    except OSError as e:
        print("DENIED", e.errno)
`})
	res := runIn(t, root, build, []string{"python3", "connect.py", sock, "@capstan-test-" + strconv.Itoa(os.Getpid())}, nil)
	out := string(res.Stdout)
	if strings.Contains(out, "CONNECTED") || strings.Count(out, "DENIED") != 2 {
		t.Fatalf("a UNIX socket was reachable: %s %s", out, res.Stderr)
	}
	select {
	case <-accepted:
		t.Fatal("a listener accepted a connection from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestOnlyInternetSocketsCanBeCreated: in the sandbox socket(2) creates
// AF_INET and AF_INET6 sockets only; every other family is refused by the
// seccomp filter with EACCES (not the EPERM, EAFNOSUPPORT or success the
// kernel would answer without it), and socketpair(2) works.
func TestOnlyInternetSocketsCanBeCreated(t *testing.T) {
	needPython(t)
	root, build := skillDir(t, map[string]string{"families.py": `import socket, errno
for name, fam, typ in [("AF_INET", 2, socket.SOCK_STREAM), ("AF_INET6", 10, socket.SOCK_DGRAM),
        ("AF_UNIX", 1, socket.SOCK_STREAM), ("AF_NETLINK", 16, socket.SOCK_RAW), ("AF_PACKET", 17, socket.SOCK_RAW),
        ("AF_VSOCK", 40, socket.SOCK_STREAM), ("AF_ALG", 38, socket.SOCK_SEQPACKET), ("AF_KEY", 15, socket.SOCK_RAW),
        ("AF_BLUETOOTH", 31, socket.SOCK_STREAM), ("AF_CAN", 29, socket.SOCK_RAW), ("AF_TIPC", 30, socket.SOCK_RDM),
        ("AF_XDP", 44, socket.SOCK_RAW), ("AF_RDS", 21, socket.SOCK_SEQPACKET)]:
    try:
        socket.socket(fam, typ).close()
        print(name, "created")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
a, b = socket.socketpair()
a.sendall(b"x"); print("socketpair", b.recv(1).decode())
`})
	res := runIn(t, root, build, []string{"python3", "families.py"}, nil)
	want := `AF_INET created
AF_INET6 created
AF_UNIX EACCES
AF_NETLINK EACCES
AF_PACKET EACCES
AF_VSOCK EACCES
AF_ALG EACCES
AF_KEY EACCES
AF_BLUETOOTH EACCES
AF_CAN EACCES
AF_TIPC EACCES
AF_XDP EACCES
AF_RDS EACCES
socketpair x`
	if got := strings.TrimSpace(string(res.Stdout)); got != want {
		t.Fatalf("socket families in the sandbox:\n%s\nwant:\n%s\n(%s %s)", got, want, res.Status, res.Stderr)
	}
}

// TestProgramHoldsNoCapabilities: the effective, permitted and inheritable
// capability sets of the sandboxed program are empty, whoever runs capstan.
func TestProgramHoldsNoCapabilities(t *testing.T) {
	needPython(t)
	root, build := skillDir(t, map[string]string{"caps.py": `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
print(libc.capget(hdr, data), list(data))
`})
	res := runIn(t, root, build, []string{"python3", "caps.py"}, nil)
	if got := strings.TrimSpace(string(res.Stdout)); got != "0 [0, 0, 0, 0, 0, 0]" {
		t.Fatalf("capabilities: %q (%s %s)", got, res.Status, res.Stderr)
	}
}

// TestMemoryIsBoundedPerTree: four children that each stay under the
// per-process address-space limit are stopped together at the tree's
// memory limit.
func TestMemoryIsBoundedPerTree(t *testing.T) {
	needPython(t)
	root, build := skillDir(t, map[string]string{"kids.sh": `for i in 1 2 3 4; do
  python3 -c 'import time; b = b"x" * (150 << 20); print("holding", flush=True); time.sleep(30)' &
done
wait
echo all-done
`})
	res := runIn(t, root, build, []string{"bash", "kids.sh"}, func(s *Spec) {
		s.Limits.MemoryMB = 300
		s.Timeout = 60 * time.Second
	})
	if res.Status != StatusMemoryLimit || strings.Contains(string(res.Stdout), "all-done") {
		t.Fatalf("status %s reason %q stdout %q", res.Status, res.Reason, res.Stdout)
	}
	if res.Duration > 30*time.Second {
		t.Errorf("killed only after %s", res.Duration)
	}
}

// TestWritesStopAtTheBudget: a script that writes ten 5 MB files under an
// 8 MiB write budget is stopped while it runs, gets disk_limit, and leaves
// nothing it wrote behind.
func TestWritesStopAtTheBudget(t *testing.T) {
	root, build := skillDir(t, nil)
	if err := os.WriteFile(filepath.Join(build, "old.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(filepath.Join(build, "old.txt"), old, old)
	res := runIn(t, root, build, []string{"bash", "-c", "for i in $(seq 10); do head -c 5000000 /dev/zero > build/f$i; sleep 0.3; done; echo finished"}, func(s *Spec) {
		s.WriteLimitMB = 8
		s.Timeout = 60 * time.Second
	})
	if res.Status != StatusDiskLimit || strings.Contains(string(res.Stdout), "finished") {
		t.Fatalf("status %s reason %q stdout %q", res.Status, res.Reason, res.Stdout)
	}
	ents, _ := os.ReadDir(build)
	if len(ents) != 1 || ents[0].Name() != "old.txt" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("build/ after the run: %v", names)
	}
}

// TestCPUSpinAtEqualLimitsIsCPULimit: with the CPU limit equal to the wall
// limit (as skill scripts have), a spin is reported as cpu_limit, not as
// timeout.
func TestCPUSpinAtEqualLimitsIsCPULimit(t *testing.T) {
	root, build := skillDir(t, nil)
	res := runIn(t, root, build, []string{"bash", "-c", "while :; do :; done"}, func(s *Spec) {
		s.Limits.CPUSeconds = 2
		s.Timeout = 2 * time.Second
	})
	if res.Status != StatusCPULimit {
		t.Fatalf("status %s reason %q cpu %s", res.Status, res.Reason, res.CPUTime)
	}
	// A program that sleeps through its wall limit is a timeout.
	res = runIn(t, root, build, []string{"sleep", "30"}, func(s *Spec) {
		s.Limits.CPUSeconds = 2
		s.Timeout = 2 * time.Second
	})
	if res.Status != StatusTimeout {
		t.Fatalf("sleep: status %s", res.Status)
	}
}
