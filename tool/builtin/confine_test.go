package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// escapeFixture builds a work dir full of ways out.
func escapeFixture(t *testing.T) *env {
	e := newEnv(t)
	e.write("ok.txt", "inside\n")
	e.symlink(filepath.Join(e.outside, "secret.txt"), "abs-file-link")  // file link, absolute target
	e.symlink("../outside/secret.txt", "rel-file-link")                 // file link, relative target
	e.symlink(e.outside, "abs-dir-link")                                // dir link, absolute
	e.symlink("../outside", "rel-dir-link")                             // dir link, relative
	e.symlink("../../outside", "sub/deeper-dir-link")                   // from a subdir
	e.symlink(filepath.Join(e.outside, "not-yet.txt"), "dangling-link") // dangling, outside
	e.symlink("chain2", "chain1")                                       // chain ending outside
	e.symlink("sub/../abs-dir-link/secret.txt", "chain2")               //
	e.symlink("/", "root-link")                                         // the file system root
	e.symlink("..", "parent-link")                                      // the parent dir
	e.symlink("loop-b", "loop-a")                                       // a loop
	e.symlink("loop-a", "loop-b")                                       //
	e.symlink("ok.txt", "inside-link")                                  // stays inside: allowed
	e.symlink(filepath.Join(e.work, "sub"), "abs-inside-dir-link")      // absolute but inside: allowed
	e.symlink("sub/../ok.txt", "inside-dotdot-link")                    // relative with .. but inside
	return e
}

var escapes = []string{
	"../outside/secret.txt",
	"a/../../outside/secret.txt",
	"./../outside/secret.txt",
	"abs-file-link",
	"rel-file-link",
	"abs-dir-link/secret.txt",
	"rel-dir-link/secret.txt",
	"sub/deeper-dir-link/secret.txt",
	"chain1",
	"root-link/etc/passwd",
	"parent-link/outside/secret.txt",
}

func TestReadRefusesEscapes(t *testing.T) {
	e := escapeFixture(t)
	paths := append(append([]string{}, escapes...), filepath.Join(e.outside, "secret.txt"), "/etc/passwd", "dangling-link")
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			r := e.call("Read", m{"file_path": p})
			msg := mustFail(t, r, agenterr.CodePathEscape)
			if strings.Contains(msg, "TOP-SECRET") {
				t.Fatal("secret leaked")
			}
		})
	}
	mustFail(t, e.call("Read", m{"file_path": "loop-a"}), "too many levels")
	for _, p := range []string{"inside-link", "inside-dotdot-link", "abs-inside-dir-link/../ok.txt", filepath.Join(e.work, "ok.txt")} {
		if out := mustOK(t, e.call("Read", m{"file_path": p})); !strings.Contains(out, "inside") {
			t.Errorf("%s: %q", p, out)
		}
	}
}

func TestWriteAndEditRefuseEscapes(t *testing.T) {
	e := escapeFixture(t)
	targets := append(append([]string{}, escapes...),
		"dangling-link",             // would create outside/not-yet.txt
		"abs-dir-link/new.txt",      // new file under a symlinked dir
		"rel-dir-link/sub/new.txt",  // new dirs under a symlinked dir
		"sub/deeper-dir-link/x.txt", //
		filepath.Join(e.outside, "new.txt"),
	)
	for _, p := range targets {
		t.Run(p, func(t *testing.T) {
			mustFail(t, e.call("Write", m{"file_path": p, "content": "PWNED"}), agenterr.CodePathEscape)
			mustFail(t, e.call("Edit", m{"file_path": p, "old_string": "TOP-SECRET", "new_string": "PWNED"}), agenterr.CodePathEscape)
		})
	}
	// Nothing outside changed or appeared.
	entries, _ := os.ReadDir(e.outside)
	if len(entries) != 1 {
		t.Errorf("outside dir now holds %d entries", len(entries))
	}
	if b, _ := os.ReadFile(filepath.Join(e.outside, "secret.txt")); string(b) != "TOP-SECRET\n" {
		t.Errorf("outside file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(e.base, "PWNED")); err == nil {
		t.Error("file created in the parent")
	}
}

func TestWriteThroughInsideLinkKeepsLink(t *testing.T) {
	e := escapeFixture(t)
	mustOK(t, e.call("Write", m{"file_path": "inside-link", "content": "changed\n"}))
	if got, _ := e.read("ok.txt"); got != "changed\n" {
		t.Errorf("target content = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(e.work, "inside-link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced by a file")
	}
	mustOK(t, e.call("Write", m{"file_path": "abs-inside-dir-link/n.txt", "content": "n"}))
	if got, _ := e.read("sub/n.txt"); got != "n" {
		t.Errorf("write through inside dir link: %q", got)
	}
	mustOK(t, e.call("Edit", m{"file_path": "inside-dotdot-link", "old_string": "changed", "new_string": "edited"}))
	if got, _ := e.read("ok.txt"); got != "edited\n" {
		t.Errorf("edit through link = %q", got)
	}
}

func TestWorkDirReachedThroughSymlink(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o755)
	os.WriteFile(filepath.Join(real, "f.txt"), []byte("x\n"), 0o644)
	alias := filepath.Join(base, "alias")
	if err := os.Symlink(real, alias); err != nil {
		t.Fatal(err)
	}
	tools, err := New(Config{WorkDir: alias})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, work: alias, tools: map[string]tool.Tool{}}
	for _, tl := range tools {
		e.tools[tl.Spec().Name] = tl
	}
	// Absolute paths through either spelling of the work dir are inside.
	mustOK(t, e.call("Read", m{"file_path": filepath.Join(alias, "f.txt")}))
	mustOK(t, e.call("Read", m{"file_path": filepath.Join(real, "f.txt")}))
	// An absolute link target through the alias spelling stays inside.
	os.Symlink(filepath.Join(alias, "f.txt"), filepath.Join(real, "via-alias"))
	mustOK(t, e.call("Read", m{"file_path": "via-alias"}))
	mustFail(t, e.call("Read", m{"file_path": filepath.Join(base, "alias-not", "f.txt")}), agenterr.CodePathEscape)
}

func TestGlobAndGrepStayInside(t *testing.T) {
	e := escapeFixture(t)
	e.write("sub/code.go", "package sub // TOP-SECRET-LOOKALIKE is inside\n")
	for _, pattern := range []string{"**/*", "**", "*", "**/secret.txt", "*/secret.txt", "abs-dir-link/*", "rel-dir-link/**"} {
		r := e.call("Glob", m{"pattern": pattern})
		if r.IsError && !strings.Contains(r.Content, agenterr.CodePathEscape) {
			t.Errorf("Glob %q: %s", pattern, r.Content)
		}
		if out := r.Content; strings.Contains(out, "secret.txt") {
			t.Errorf("Glob %q listed an outside file:\n%s", pattern, out)
		}
	}
	mustFail(t, e.call("Glob", m{"pattern": "../outside/*"}), agenterr.CodePathEscape)
	mustFail(t, e.call("Glob", m{"pattern": "sub/../../outside/*"}), agenterr.CodePathEscape)
	mustFail(t, e.call("Glob", m{"pattern": filepath.Join(e.outside, "*")}), agenterr.CodePathEscape)
	mustFail(t, e.call("Glob", m{"pattern": "*", "path": "abs-dir-link"}), agenterr.CodePathEscape)
	mustFail(t, e.call("Glob", m{"pattern": "*", "path": "../outside"}), agenterr.CodePathEscape)

	for _, in := range []m{
		{"pattern": "TOP-SECRET", "output_mode": "content"},
		{"pattern": "TOP", "output_mode": "content", "glob": "*"},
		{"pattern": ".", "output_mode": "files_with_matches"},
		{"pattern": "SECRET", "output_mode": "count", "path": "sub"},
	} {
		out := mustOK(t, e.call("Grep", in))
		if strings.Contains(out, "TOP-SECRET\n") || strings.Contains(out, "secret.txt") ||
			strings.Contains(out, "abs-file-link") || strings.Contains(out, "rel-file-link") || strings.Contains(out, "chain1") {
			t.Errorf("Grep %v reached outside:\n%s", in, out)
		}
	}
	for _, p := range []string{"abs-file-link", "rel-dir-link", "../outside", e.outside, "chain1"} {
		mustFail(t, e.call("Grep", m{"pattern": "TOP", "path": p}), agenterr.CodePathEscape)
	}
}

func TestRootRefusalIsPathEscape(t *testing.T) {
	e := escapeFixture(t)
	ws, err := newWorkspace(e.work)
	if err != nil {
		t.Fatal(err)
	}
	root, err := ws.open()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = root.Open("abs-dir-link/secret.txt")
	if err == nil {
		t.Fatal("os.Root followed a link outside")
	}
	if code := agenterr.CodeOf(osErr("abs-dir-link/secret.txt", err)); code != agenterr.CodePathEscape {
		t.Errorf("code %s for %v", code, err)
	}
}

// TestSwappedLinkRace swaps a directory for a link to the outside while
// Read, Write and Grep run: whatever the interleaving, nothing outside is
// read or written (os.Root re-checks every component at use).
func TestSwappedLinkRace(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.work, "d")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("harmless\n"), 0o644)
	stop := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		tmp := filepath.Join(e.work, "d-real")
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Rename(dir, tmp)
			os.Symlink(e.outside, dir)
			os.Remove(dir)
			os.Rename(tmp, dir)
		}
	}()
	for i := 0; i < 300; i++ {
		for _, r := range []tool.Result{
			e.call("Read", m{"file_path": "d/secret.txt"}),
			e.call("Grep", m{"pattern": "SECRET|harmless", "path": "d", "output_mode": "content"}),
			e.call("Write", m{"file_path": "d/secret.txt", "content": "harmless\n"}),
		} {
			if strings.Contains(r.Content, "TOP-SECRET") {
				close(stop)
				t.Fatalf("iteration %d read outside: %s", i, r.Content)
			}
		}
	}
	close(stop)
	<-swapped
	if b, _ := os.ReadFile(filepath.Join(e.outside, "secret.txt")); string(b) != "TOP-SECRET\n" {
		t.Fatalf("outside file overwritten: %q", b)
	}
	if entries, _ := os.ReadDir(e.outside); len(entries) != 1 {
		t.Fatalf("outside dir has %d entries", len(entries))
	}
}
