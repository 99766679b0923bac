package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarizeLines(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		b.WriteString("line\n")
	}
	s, n := summarizeLines(b.String(), MaxStderrLines)
	if n != 2000 {
		t.Errorf("n = %d", n)
	}
	if got := strings.Count(s, "\n") + 1; got > MaxStderrLines {
		t.Errorf("summary has %d lines", got)
	}
	if !strings.Contains(s, "lines omitted") {
		t.Error("no omission marker")
	}
	if s, n := summarizeLines("a\nb\n", 512); s != "a\nb" || n != 2 {
		t.Errorf("%q %d", s, n)
	}
	long := strings.Repeat("x", 5000)
	if s, _ := summarizeLines(long, 512); len(s) > 1100 {
		t.Errorf("long line kept %d bytes", len(s))
	}
}

func TestCappedBuffer(t *testing.T) {
	calls := 0
	c := &cappedBuffer{max: 10, onOverflow: func() { calls++ }}
	for i := 0; i < 5; i++ {
		if n, err := c.Write([]byte("abcd")); n != 4 || err != nil {
			t.Fatal(n, err)
		}
	}
	if c.buf.String() != "abcdabcdab" || !c.overflow || calls != 1 {
		t.Errorf("%q %v %d", c.buf.String(), c.overflow, calls)
	}
}

func TestScriptIO(t *testing.T) {
	argv, stdin, err := scriptIO(json.RawMessage(`{"argv":["-v","x"],"stdin":{"a":1}}`))
	if err != nil || strings.Join(argv, " ") != "-v x" || string(stdin) != `{"a":1}` {
		t.Errorf("%v %q %v", argv, stdin, err)
	}
	if _, _, err := scriptIO(json.RawMessage(`{"argv":"x"}`)); err == nil {
		t.Error("argv string accepted")
	}
	if _, _, err := scriptIO(json.RawMessage(`[1]`)); err == nil {
		t.Error("array accepted")
	}
	if _, stdin, _ := scriptIO(nil); string(stdin) != "{}" {
		t.Errorf("empty args stdin %q", stdin)
	}
}

func FuzzScriptArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"argv":["a"]}`, `{"stdin":"x"}`, `{"stdin":[1,2]}`, `null`, `{"argv":[1]}`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		argv, stdin, err := scriptIO(b)
		if err != nil {
			return
		}
		if stdin == nil && len(argv) > 0 {
			t.Fatal("argv without stdin")
		}
	})
}

func FuzzResolveInside(f *testing.F) {
	root := f.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	os.Symlink("/etc", filepath.Join(root, "a", "etc"))
	os.Symlink("../..", filepath.Join(root, "a", "up"))
	for _, s := range []string{"a/b/c.txt", "../x", "a/etc/passwd", "a/up/x", "./a/../a/b", "/abs", "a//b", "a/b/../../..", "…/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		p, err := ResolveInside(root, rel)
		if err != nil {
			return
		}
		if !within(root, p) {
			t.Fatalf("%q resolved to %q outside %q", rel, p, root)
		}
		if r, err := filepath.EvalSymlinks(p); err == nil && !within(root, r) {
			t.Fatalf("%q resolves through a symlink to %q", rel, r)
		}
	})
}

func TestConfinePATH(t *testing.T) {
	env := confinePATH([]string{"A=1", "PATH=/home/dev/.pyenv/shims:/usr/local/bin:relative:/opt/x/bin:/usr/bin"}, []string{"/usr", "/opt/x"})
	if strings.Join(env, " ") != "A=1 PATH=/usr/local/bin:/opt/x/bin:/usr/bin" {
		t.Errorf("%v", env)
	}
	if env := confinePATH([]string{"PATH=/home/u/bin"}, []string{"/usr"}); env[0] != "PATH="+sandboxPATH {
		t.Errorf("%v", env)
	}
	if env := confinePATH(nil, nil); len(env) != 1 || env[0] != "PATH="+sandboxPATH {
		t.Errorf("%v", env)
	}
}

// TestConfineToolchainDirs: toolchain variables that name a directory the
// sandbox cannot read (or, for caches, write) are dropped; settings and
// directories inside the work dir are kept.
func TestConfineToolchainDirs(t *testing.T) {
	env := confineToolchainDirs([]string{
		"GOFLAGS=-mod=vendor", "GOCACHE=/home/u/.cache/go-build", "GOMODCACHE=/w/.modcache", "VIRTUAL_ENV=/w/.venv",
		"GOROOT=/home/u/sdk/go", "PYTHONPATH=/w/src:/home/u/lib:/usr/lib/py", "CARGO_HOME=/home/u/.cargo", "OTHER=/home/u",
	}, []string{"/w", "/usr"}, []string{"/w"})
	want := "GOFLAGS=-mod=vendor GOMODCACHE=/w/.modcache VIRTUAL_ENV=/w/.venv PYTHONPATH=/w/src:/usr/lib/py OTHER=/home/u"
	if got := strings.Join(env, " "); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
