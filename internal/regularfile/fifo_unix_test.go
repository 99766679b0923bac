//go:build unix

package regularfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO is refused at once: opening it for reading without O_NONBLOCK
// would wait for a writer that never comes.
func TestOpenRefusesFIFOWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for name, open := range map[string]func() error{
		"os.OpenFile": func() error { _, _, err := Open(os.OpenFile, p); return err },
		"os.Root":     func() error { _, _, err := Open(root.OpenFile, "pipe"); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- open() }()
		select {
		case err := <-done:
			var nr *NotRegularError
			if !errors.As(err, &nr) || nr.Info.Mode().Type() != fs.ModeNamedPipe {
				t.Errorf("%s: err = %v, want a NotRegularError for a named pipe", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: Open blocks on a FIFO", name)
		}
	}
}
