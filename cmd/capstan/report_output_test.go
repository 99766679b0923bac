package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// report -o writes a regular file atomically, but never puts a regular
// file in place of a device or FIFO (as root, -o /dev/null replaced the
// device) or of a symbolic link.
func TestWriteFileAtomicKeepsWhatIsThere(t *testing.T) {
	dir := t.TempDir()

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	// Held open for reading and writing, the FIFO takes the report
	// without a reader goroutine, and nothing blocks if it is replaced.
	pipe, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	if err := writeFileAtomic(fifo, []byte("report")); err != nil {
		t.Fatal(err)
	}
	if err := pipe.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	if n, _ := pipe.Read(b); string(b[:n]) != "report" {
		t.Errorf("the FIFO got %q", b[:n])
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi.Mode(), err)
	}

	target := filepath.Join(dir, "real.html")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink("real.html", link); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Errorf("the link's file holds %q", b)
	}

	plain := filepath.Join(dir, "plain.html")
	for _, want := range []string{"first", "second"} {
		if err := writeFileAtomic(plain, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(plain); string(b) != want {
			t.Errorf("plain file holds %q, want %q", b, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}
