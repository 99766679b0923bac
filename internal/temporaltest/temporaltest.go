// Package temporaltest starts a Temporal dev server (the `temporal` CLI's
// `server start-dev`) on loopback for tests and benchmarks.
//
// The CLI is found on PATH. Without it a test is skipped with the reason,
// unless the CI environment variable is set: CI installs the CLI, so there
// a missing one fails the test.
package temporaltest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// CLI returns the path of the `temporal` CLI, skipping (or, under CI,
// failing) tb when it is not on PATH.
func CLI(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("temporal")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("the temporal CLI is not on PATH (CI installs it: go install github.com/temporalio/cli/cmd/temporal@v1.5.1): %v", err)
		}
		tb.Skipf("the temporal CLI is not on PATH; install it with go install github.com/temporalio/cli/cmd/temporal@v1.5.1 to run this test")
	}
	return p
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Server starts a dev server with an in-memory store on free loopback
// ports, waits until it answers, stops it when tb ends, and returns its
// frontend HOST:PORT.
func Server(tb testing.TB) string {
	tb.Helper()
	cli := CLI(tb)
	var last error
	for try := 0; try < 3; try++ {
		port := freePort(tb)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		logf, err := os.Create(filepath.Join(tb.TempDir(), "temporal-server.log"))
		if err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command(cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port),
			"--http-port", strconv.Itoa(freePort(tb)), "--metrics-port", strconv.Itoa(freePort(tb)),
			"--db-filename", "", "--log-level", "error")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start %s: %v", cli, err)
		}
		// exited is closed when the server has ended (a port another
		// process took a moment ago ends it at once): waitReady and stop
		// both wait on it.
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
			logf.Close()
		}
		if last = waitReady(addr, exited, &waitErr); last == nil {
			tb.Cleanup(stop)
			return addr
		}
		stop()
	}
	tb.Fatalf("the Temporal dev server did not start: %v", last)
	return ""
}

// waitReady waits until the frontend at addr accepts a client, or the
// server ends (exited closed; *waitErr then says how).
func waitReady(addr string, exited <-chan struct{}, waitErr *error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quiet{}})
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("server exited: %v", *waitErr)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// quiet is a logger that drops the SDK's messages.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
