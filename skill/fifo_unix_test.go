//go:build unix

package skill

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A script the model runs can create a FIFO in build/. Opening a FIFO for
// reading blocks until someone writes to it, so every tool that reads a
// build/ file, and the final check of the expected outputs, must refuse it
// instead of hanging the run.
func TestFIFOInBuildDoesNotHang(t *testing.T) {
	sk := exampleSkill(t)
	build := t.TempDir()
	for _, name := range []string{"summary.md", "pipe.txt"} {
		if err := syscall.Mkfifo(filepath.Join(build, name), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	m := &playModel{turns: []playTurn{
		{text: "read", calls: [][2]string{
			call("readFile", `{"path":"build/pipe.txt"}`),
			call("summarize", `{"path":"build/pipe.txt"}`),
			call("diff", `{"a":"build/pipe.txt","b":"SKILL.md"}`),
			call("validate", `{"path":"pipe.txt","rules":{"non_empty":true}}`),
			call("writeArtifact", `{"path":"pipe.txt","content":"x"}`),
			call("finalize", `{}`),
		}},
	}}
	done := make(chan struct{})
	var res *ActResult
	var err error
	go func() {
		defer close(done)
		res, err = New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport, BuildDir: build, Fresh: true})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the run hangs on a FIFO in build/")
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed {
		t.Error("a FIFO in place of summary.md completed the run")
	}
	joined := strings.Join(m.seen, "\n")
	if !strings.Contains(joined, "not a regular file") && !strings.Contains(joined, "does not exist") {
		t.Errorf("the model was not told the FIFO cannot be read: %.600s", joined)
	}
	if _, err := os.Stat(filepath.Join(build, "pipe.txt")); err != nil {
		t.Fatal(err)
	}
}
