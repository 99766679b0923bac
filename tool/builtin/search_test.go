package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var epoch = time.Now().Truncate(time.Second)

func touch(t *testing.T, p string, age time.Duration) {
	t.Helper()
	ts := epoch.Add(-age)
	if err := os.Chtimes(p, ts, ts); err != nil {
		t.Fatal(err)
	}
}

func TestGlob(t *testing.T) {
	e := newEnv(t)
	touch(t, e.write("a.go", "package a\n"), 3*time.Hour)
	touch(t, e.write("src/b.go", "package b\n"), 1*time.Hour)
	touch(t, e.write("src/deep/c.go", "package c\n"), 2*time.Hour)
	touch(t, e.write("src/deep/c_test.go", "package c\n"), 2*time.Hour)
	// Equal mtimes, so the two are listed by name: written back to back,
	// the second is a few nanoseconds newer on most file systems and sorts
	// first, except when the clock's granularity hides the gap.
	touch(t, e.write("src/x.ts", ""), 4*time.Hour)
	touch(t, e.write("src/y.tsx", ""), 4*time.Hour)
	e.write(".git/HEAD", "ref\n")
	e.write(".capstan/runs/r/events.jsonl", "{}\n")
	os.MkdirAll(filepath.Join(e.work, "emptydir"), 0o755)

	cases := map[string]struct {
		in   m
		want string
	}{
		"recursive by mtime": {m{"pattern": "**/*.go"}, "src/b.go\nsrc/deep/c.go\nsrc/deep/c_test.go\na.go"},
		"one level":          {m{"pattern": "*.go"}, "a.go"},
		"with path":          {m{"pattern": "*.go", "path": "src"}, "src/b.go"},
		"path and **":        {m{"pattern": "**/c*.go", "path": "src/deep"}, "src/deep/c.go\nsrc/deep/c_test.go"},
		"braces":             {m{"pattern": "src/*.{ts,tsx}"}, "src/x.ts\nsrc/y.tsx"},
		"literal file":       {m{"pattern": "src/b.go"}, "src/b.go"},
		"absolute inside":    {m{"pattern": filepath.Join(e.work, "src", "*.go")}, "src/b.go"},
		"dot slash":          {m{"pattern": "./src/*.go"}, "src/b.go"},
		"no match":           {m{"pattern": "**/*.rs"}, "No files found"},
		"missing dir":        {m{"pattern": "nope/**"}, "No files found"},
		"skips vcs+journal":  {m{"pattern": "**/HEAD"}, "No files found"},
		"skips journal":      {m{"pattern": "**/*.jsonl"}, "No files found"},
		"files only":         {m{"pattern": "*dir"}, "No files found"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := mustOK(t, e.call("Glob", c.in)); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
	mustFail(t, e.call("Glob", m{"pattern": "src/[a-"}), "bad glob")
	mustFail(t, e.call("Glob", m{"pattern": ""}), "pattern is empty")
}

func TestGlobCapsResults(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < MaxGlobResults+5; i++ {
		e.write(fmt.Sprintf("f%03d.txt", i), "")
	}
	out := mustOK(t, e.call("Glob", m{"pattern": "*.txt"}))
	if n := strings.Count(out, ".txt"); n != MaxGlobResults || !strings.Contains(out, "[5 more files not shown") {
		t.Errorf("%d results, tail %q", n, out[len(out)-80:])
	}
}

func TestGrep(t *testing.T) {
	e := newEnv(t)
	e.write("a.go", "package a\nfunc Alpha() {}\n// TODO alpha\n")
	e.write("src/b.go", "package b\nfunc beta() {}\r\n")
	e.write("src/c.ts", "const ALPHA = 1\n")
	e.write("bin.dat", "alpha\x00binary")
	e.write(".git/config", "alpha\n")
	cases := map[string]struct {
		in   m
		want string
	}{
		"files default":  {m{"pattern": "(?i)alpha"}, "a.go\nsrc/c.ts"},
		"-i":             {m{"pattern": "alpha", "-i": true}, "a.go\nsrc/c.ts"},
		"case sensitive": {m{"pattern": "alpha"}, "a.go"},
		"content":        {m{"pattern": "func", "output_mode": "content"}, "a.go:2:func Alpha() {}\nsrc/b.go:2:func beta() {}"},
		"content no -n":  {m{"pattern": "func", "output_mode": "content", "-n": false}, "a.go:func Alpha() {}\nsrc/b.go:func beta() {}"},
		"count":          {m{"pattern": "a", "output_mode": "count", "glob": "*.go"}, "a.go:3\nsrc/b.go:2"},
		"glob by name":   {m{"pattern": ".", "glob": "*.ts"}, "src/c.ts"},
		"glob by path":   {m{"pattern": ".", "glob": "src/**"}, "src/b.go\nsrc/c.ts"},
		"path dir":       {m{"pattern": "package", "path": "src"}, "src/b.go"},
		"path file":      {m{"pattern": "Alpha", "path": "a.go", "output_mode": "content"}, "a.go:2:func Alpha() {}"},
		"head_limit":     {m{"pattern": ".", "output_mode": "content", "head_limit": 2}, "a.go:1:package a\na.go:2:func Alpha() {}\n[stopped at head_limit 2]"},
		"anchors":        {m{"pattern": "^package b$", "output_mode": "content"}, "src/b.go:1:package b"},
		"no match":       {m{"pattern": "zzz"}, "No files found"},
		"no content":     {m{"pattern": "zzz", "output_mode": "content"}, "No matches found"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := mustOK(t, e.call("Grep", c.in)); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
	mustFail(t, e.call("Grep", m{"pattern": "(unclosed"}), "bad regular expression")
	mustFail(t, e.call("Grep", m{"pattern": "a", "output_mode": "lines"}), "output_mode")
	mustFail(t, e.call("Grep", m{"pattern": "a", "head_limit": 0}), "head_limit")
	mustFail(t, e.call("Grep", m{"pattern": "a", "glob": "[x"}), "bad glob")
	mustFail(t, e.call("Grep", m{"pattern": "a", "path": "missing"}), "no such file")
	mustFail(t, e.call("Grep", m{"pattern": ""}), "pattern is empty")
}

func TestGrepOutputCap(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxOutputBytes = 500 })
	e.write("big.txt", strings.Repeat("match this line\n", 1000))
	out := mustOK(t, e.call("Grep", m{"pattern": "match", "output_mode": "content"}))
	if len(out) > 700 || !strings.Contains(out, "output truncated") {
		t.Errorf("%d bytes: %q", len(out), out)
	}
}

func TestGrepContext(t *testing.T) {
	e := newEnv(t)
	e.write("a.txt", "1\n2\nHIT 3\n4\n5\n6\n7\nHIT 8\n9\n")
	e.write("b.txt", "x\nHIT y\n")
	cases := map[string]struct {
		in   m
		want string
	}{
		"-C1": {m{"pattern": "HIT", "output_mode": "content", "-C": 1},
			"a.txt-2-2\na.txt:3:HIT 3\na.txt-4-4\n--\na.txt-7-7\na.txt:8:HIT 8\na.txt-9-9\n--\nb.txt-1-x\nb.txt:2:HIT y"},
		"-A2 merges": {m{"pattern": "HIT", "output_mode": "content", "-A": 5, "path": "a.txt"},
			"a.txt:3:HIT 3\na.txt-4-4\na.txt-5-5\na.txt-6-6\na.txt-7-7\na.txt:8:HIT 8\na.txt-9-9"},
		"-B1 no numbers": {m{"pattern": "HIT", "output_mode": "content", "-B": 1, "-n": false, "path": "a.txt"},
			"a.txt-2\na.txt:HIT 3\n--\na.txt-7\na.txt:HIT 8"},
		"-C overridden by -A0": {m{"pattern": "HIT", "output_mode": "content", "-C": 1, "-A": 0, "path": "b.txt"},
			"b.txt-1-x\nb.txt:2:HIT y"},
		"context ignored in files mode": {m{"pattern": "HIT", "-C": 3}, "a.txt\nb.txt"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := mustOK(t, e.call("Grep", c.in)); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
	mustFail(t, e.call("Grep", m{"pattern": "x", "-C": -1}), "-C must be between")
	mustFail(t, e.call("Grep", m{"pattern": "x", "-A": 1000}), "-A must be between")
}
