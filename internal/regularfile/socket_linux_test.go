package regularfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A Unix socket cannot be opened at all (ENXIO); it is refused as what it
// is, like a FIFO, rather than as a failure to read.
func TestOpenRefusesSocket(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: p}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for name, open := range map[string]func() error{
		"os.OpenFile": func() error { _, _, err := Open(os.OpenFile, p); return err },
		"os.Root":     func() error { _, _, err := Open(root.OpenFile, "sock"); return err },
	} {
		var nr *NotRegularError
		if err := open(); !errors.As(err, &nr) || nr.Info.Mode().Type() != fs.ModeSocket {
			t.Errorf("%s: err = %v, want a NotRegularError for a socket", name, err)
		}
	}
}
