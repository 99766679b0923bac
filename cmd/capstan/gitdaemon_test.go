package main

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// serveGit serves the bare repositories under base over git:// on a
// loopback port (pushes allowed) and returns the URL prefix. A remote is
// another machine: a push that a test kills along with a worker's process
// group must not kill the remote's side of it, which would leave its ref
// lock behind in the repository for good, as a file:// remote's
// receive-pack (a child of the killed push) does.
func serveGit(t testing.TB, base string) string {
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
				return fmt.Sprintf("git://%s/", addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatal("git daemon did not start")
	return ""
}
