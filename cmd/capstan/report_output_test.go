package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// Without -o, report names the file itself, often in the agent's work
// dir: a symbolic link planted there under that name is refused, never
// written through (it named a file of the user's), and so is a FIFO.
func TestReportDefaultOutputRefusesPlantedLink(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	code, out := sh("mkdir w && capstan run " + shellQuote(hello) + " --workdir w -q --json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	var res struct{ RunID string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	victim := filepath.Join(parent, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := "report-" + res.RunID + ".html"
	if err := os.Symlink(victim, filepath.Join(parent, "w", name)); err != nil {
		t.Fatal(err)
	}
	code, out = sh("cd w && capstan report " + res.RunID)
	if code != exitUsage || !strings.Contains(out, "not a regular file") {
		t.Errorf("report onto a planted link: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's file was written: %.40q", b)
	}
	if code, out := sh("cd w && capstan report " + res.RunID + " -o r.html"); code != 0 {
		t.Errorf("with -o: exit %d\n%s", code, out)
	}
}
