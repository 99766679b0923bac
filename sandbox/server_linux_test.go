//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"io"
	"testing"
	"time"
)

// A server started with StartServer answers on its pipes for as long as
// it is open; Close ends it, also one that ignores its closed input.
func TestStartServerSpeaksOnItsPipesUntilClosed(t *testing.T) {
	r := sharedRunner(t)
	box := &CommandRunner{Runner: r}
	dir := t.TempDir()
	srv, err := box.StartServer(context.Background(), []string{"cat"}, dir, []string{"PATH=/usr/bin:/bin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(srv.Stdout)
	for _, msg := range []string{"one\n", "two\n"} {
		if _, err := io.WriteString(srv.Stdin, msg); err != nil {
			t.Fatal(err)
		}
		if got, err := lines.ReadString('\n'); err != nil || got != msg {
			t.Fatalf("read %q, %v; want %q", got, err, msg)
		}
	}
	srv.Close()
	if res, err := srv.Wait(); err != nil || res.Status != StatusOK || !res.Sandboxed {
		t.Fatalf("cat after its input closed: %+v %v", res, err)
	}

	stubborn, err := box.StartServer(context.Background(), []string{"sleep", "600"}, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { stubborn.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close did not end a server that ignores its input")
	}
	if res, _ := stubborn.Wait(); res.Status == StatusOK {
		t.Fatalf("a killed server ended ok: %+v", res)
	}
}
