package builtin

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

func TestNewValidatesWorkDir(t *testing.T) {
	if _, err := New(Config{}); agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation {
		t.Errorf("empty work dir: %v", err)
	}
	if _, err := New(Config{WorkDir: filepath.Join(t.TempDir(), "missing")}); agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation {
		t.Errorf("missing work dir: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := New(Config{WorkDir: f}); agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation {
		t.Errorf("file as work dir: %v", err)
	}
}

func TestToolsAreNamedAndKindedAsClaudeCode(t *testing.T) {
	tools, err := New(Config{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]tool.Kind{"Read": tool.KindRead, "Glob": tool.KindRead, "Grep": tool.KindRead,
		"Write": tool.KindEdit, "Edit": tool.KindEdit, "Bash": tool.KindExecute}
	required := map[string][]string{"Read": {"file_path"}, "Write": {"file_path", "content"},
		"Edit": {"file_path", "old_string", "new_string"}, "Bash": {"command"}, "Glob": {"pattern"}, "Grep": {"pattern"}}
	if len(tools) != len(toolNames) {
		t.Fatalf("%d tools", len(tools))
	}
	for i, tl := range tools {
		s := tl.Spec()
		if s.Name != toolNames[i] || tl.Kind() != kinds[s.Name] || s.Description == "" {
			t.Errorf("tool %d: %s kind %s", i, s.Name, tl.Kind())
		}
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		if err := jsonUnmarshal(s.InputSchema, &schema); err != nil || schema.Type != "object" {
			t.Fatalf("%s schema: %v %s", s.Name, err, s.InputSchema)
		}
		if strings.Join(schema.Required, ",") != strings.Join(required[s.Name], ",") {
			t.Errorf("%s required = %v", s.Name, schema.Required)
		}
		for _, r := range schema.Required {
			if _, ok := schema.Properties[r]; !ok {
				t.Errorf("%s: required %s not in properties", s.Name, r)
			}
		}
	}
}

func TestReadNumbersLines(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "line %d\r\n", i)
	}
	e.write("f.txt", b.String())
	out := mustOK(t, e.call("Read", m{"file_path": "f.txt"}))
	if !strings.HasPrefix(out, "     1\tline 1\n     2\tline 2\n") || !strings.Contains(out, "    30\tline 30\n") {
		t.Fatalf("cat -n format wrong:\n%s", out)
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "more lines") {
		t.Errorf("unexpected content: %q", out)
	}
	out = mustOK(t, e.call("Read", m{"file_path": "f.txt", "offset": 10, "limit": 3}))
	if out != "    10\tline 10\n    11\tline 11\n    12\tline 12\n[more lines follow; continue with offset 13]\n" {
		t.Errorf("offset/limit:\n%q", out)
	}
	out = mustOK(t, e.call("Read", m{"file_path": "./f.txt", "offset": 29, "limit": 5}))
	if out != "    29\tline 29\n    30\tline 30\n" {
		t.Errorf("tail read: %q", out)
	}
	mustFail(t, e.call("Read", m{"file_path": "f.txt", "offset": 31}), "past the end")
	mustFail(t, e.call("Read", m{"file_path": "f.txt", "offset": -1}), agenterr.CodeToolInput)
	mustFail(t, e.call("Read", m{"file_path": "f.txt", "limit": 0}), agenterr.CodeToolInput)
	// Absolute path inside the work dir is fine.
	mustOK(t, e.call("Read", m{"file_path": filepath.Join(e.work, "f.txt"), "limit": 1}))
}

func TestReadEdgeCases(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxOutputBytes = 4096 })
	e.write("empty.txt", "")
	if out := mustOK(t, e.call("Read", m{"file_path": "empty.txt"})); !strings.Contains(out, "empty") {
		t.Errorf("empty file: %q", out)
	}
	e.write("bin.dat", "ELF\x00\x01\x02garbage")
	out := mustOK(t, e.call("Read", m{"file_path": "bin.dat"}))
	if !strings.Contains(out, "binary file (13 bytes)") || strings.Contains(out, "garbage") {
		t.Errorf("binary file: %q", out)
	}
	e.write("long.txt", strings.Repeat("é", 3000)+"\nnext\n")
	out = mustOK(t, e.call("Read", m{"file_path": "long.txt"}))
	if !strings.Contains(out, "[line cut]") || !strings.Contains(out, "     2\tnext") || strings.ContainsRune(out, '\uFFFD') {
		t.Errorf("long line: %.200q", out)
	}
	e.write("big.txt", strings.Repeat("0123456789\n", 2000))
	out = mustOK(t, e.call("Read", m{"file_path": "big.txt"}))
	if len(out) > 4096+200 || !strings.Contains(out, "output truncated") {
		t.Errorf("cap: %d bytes, tail %q", len(out), out[len(out)-100:])
	}
	os.Mkdir(filepath.Join(e.work, "dir"), 0o755)
	mustFail(t, e.call("Read", m{"file_path": "dir"}), "is a directory")
	mustFail(t, e.call("Read", m{"file_path": "nope.txt"}), "no such file")
	mustFail(t, e.call("Read", m{"path": "f.txt"}), `unknown field "path"`)
	mustFail(t, e.call("Read", `{"file_path": 3}`), agenterr.CodeToolInput)
	mustFail(t, e.call("Read", `not json`), agenterr.CodeToolInput)
	mustFail(t, e.call("Read", `{"file_path":"a"} {}`), "trailing data")
	mustFail(t, e.call("Read", m{"file_path": ""}), "empty path")
	mustFail(t, e.call("Read", m{"file_path": "a\x00b"}), "NUL")
}

func TestWriteAtomicKeepsMode(t *testing.T) {
	e := newEnv(t)
	out := mustOK(t, e.call("Write", m{"file_path": "deep/er/new.sh", "content": "#!/bin/sh\necho hi\n"}))
	if !strings.HasPrefix(out, "Created deep/er/new.sh") {
		t.Errorf("result %q", out)
	}
	p := filepath.Join(e.work, "deep/er/new.sh")
	if err := os.Chmod(p, 0o750); err != nil {
		t.Fatal(err)
	}
	out = mustOK(t, e.call("Write", m{"file_path": "deep/er/new.sh", "content": "#!/bin/sh\necho bye\n"}))
	if !strings.HasPrefix(out, "Updated") {
		t.Errorf("result %q", out)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o750 {
		t.Errorf("mode = %v, want 0750", st.Mode().Perm())
	}
	if got, _ := e.read("deep/er/new.sh"); got != "#!/bin/sh\necho bye\n" {
		t.Errorf("content = %q", got)
	}
	mustOK(t, e.call("Write", m{"file_path": "empty", "content": ""}))
	if got, ok := e.read("empty"); !ok || got != "" {
		t.Error("empty content not written")
	}
	entries, _ := os.ReadDir(filepath.Join(e.work, "deep/er"))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	mustFail(t, e.call("Write", m{"file_path": "x"}), "content is required")
	mustFail(t, e.call("Write", m{"file_path": "deep", "content": "x"}), "is a directory")
	mustFail(t, e.call("Write", m{"file_path": ".", "content": "x"}), "working directory itself")
	mustFail(t, e.call("Write", m{"file_path": "deep/er/new.sh/child", "content": "x"}), agenterr.CodeToolInput)
}

func TestWriteFailureLeavesOldFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	e := newEnv(t)
	e.write("ro/file.txt", "original")
	os.Chmod(filepath.Join(e.work, "ro"), 0o555)
	defer os.Chmod(filepath.Join(e.work, "ro"), 0o755)
	mustFail(t, e.call("Write", m{"file_path": "ro/file.txt", "content": "new"}), "permission denied")
	if got, _ := e.read("ro/file.txt"); got != "original" {
		t.Errorf("old content lost: %q", got)
	}
}

func TestEdit(t *testing.T) {
	e := newEnv(t)
	e.write("f.go", "package a\n\nfunc A() int { return 1 }\nfunc B() int { return 1 }\n")
	os.Chmod(filepath.Join(e.work, "f.go"), 0o600)
	out := mustOK(t, e.call("Edit", m{"file_path": "f.go", "old_string": "A() int { return 1 }", "new_string": "A() int { return 2 }"}))
	if out != "Edited f.go: 1 replacement (first at line 3)." {
		t.Errorf("result %q", out)
	}
	got, _ := e.read("f.go")
	if !strings.Contains(got, "A() int { return 2 }") || !strings.Contains(got, "B() int { return 1 }") {
		t.Errorf("content %q", got)
	}
	if st, _ := os.Stat(filepath.Join(e.work, "f.go")); st.Mode().Perm() != 0o600 {
		t.Errorf("mode changed to %v", st.Mode().Perm())
	}
	msg := mustFail(t, e.call("Edit", m{"file_path": "f.go", "old_string": "return", "new_string": "yield"}), "occurs 2 times")
	if !strings.Contains(msg, "replace_all") {
		t.Errorf("no hint: %s", msg)
	}
	if got2, _ := e.read("f.go"); got2 != got {
		t.Error("failed edit changed the file")
	}
	out = mustOK(t, e.call("Edit", m{"file_path": "f.go", "old_string": "return", "new_string": "yield", "replace_all": true}))
	if !strings.Contains(out, "2 replacements") {
		t.Errorf("replace_all result %q", out)
	}
	mustFail(t, e.call("Edit", m{"file_path": "f.go", "old_string": "missing text", "new_string": "x"}), "not found")
	mustFail(t, e.call("Edit", m{"file_path": "f.go", "old_string": "x", "new_string": "x"}), "identical")
	mustFail(t, e.call("Edit", m{"file_path": "f.go", "old_string": "", "new_string": "x"}), "already has content")
	mustFail(t, e.call("Edit", m{"file_path": "nope.go", "old_string": "a", "new_string": "b"}), "no such file")
	mustFail(t, e.call("Edit", m{"file_path": "f.go", "new_string": "b"}), "required")
	out = mustOK(t, e.call("Edit", m{"file_path": "new/file.txt", "old_string": "", "new_string": "fresh\n"}))
	if c, _ := e.read("new/file.txt"); c != "fresh\n" || !strings.HasPrefix(out, "Created") {
		t.Errorf("create via empty old_string: %q %q", out, c)
	}
	e.write("bin", "a\x00b")
	mustFail(t, e.call("Edit", m{"file_path": "bin", "old_string": "a", "new_string": "c"}), "binary")
}

func TestSpecialFilesDoNotBlock(t *testing.T) {
	e := newEnv(t)
	e.write("a.txt", "needle\n")
	if err := syscall.Mkfifo(filepath.Join(e.work, "fifo"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	e.symlink("fifo", "fifo-link")
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustFail(t, e.call("Read", m{"file_path": "fifo"}), "not a regular file")
		mustFail(t, e.call("Read", m{"file_path": "fifo-link"}), "not a regular file")
		mustFail(t, e.call("Edit", m{"file_path": "fifo", "old_string": "a", "new_string": "b"}), "not a regular file")
		mustFail(t, e.call("Write", m{"file_path": "fifo", "content": "x"}), "not a regular file")
		if out := mustOK(t, e.call("Grep", m{"pattern": "needle"})); out != "a.txt" {
			t.Errorf("grep: %q", out)
		}
		if out := mustOK(t, e.call("Grep", m{"pattern": "needle", "path": "fifo-link"})); out != "No files found" {
			t.Errorf("grep fifo: %q", out)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a tool blocked on a FIFO")
	}
}

func TestReadLineBoundaries(t *testing.T) {
	const max = 8
	cases := map[string][]string{
		"12345678\n":                        {"12345678"},
		"12345678\r\n":                      {"12345678"},
		"123456789\n":                       {"12345678 … [line cut]"},
		"1234567\r\nx":                      {"1234567", "x"},
		"ééééé\nb":                          {"éééé … [line cut]", "b"},
		"":                                  {},
		"no newline":                        {"no newli … [line cut]"},
		"a\n\nb\n":                          {"a", "", "b"},
		strings.Repeat("x", 100000) + "\ny": {"xxxxxxxx … [line cut]", "y"},
	}
	for in, want := range cases {
		br := bufio.NewReaderSize(strings.NewReader(in), 16)
		var got []string
		var buf []byte
		for {
			var err error
			buf, err = readLine(br, max, buf[:0])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(buf))
		}
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("%.20q: got %q want %q", in, got, want)
		}
	}
}

func TestEditCRLFFile(t *testing.T) {
	e := newEnv(t)
	e.write("w.txt", "line one\r\nline two\r\nline three\r\n")
	// The model copies text as Read showed it: without "\r".
	mustOK(t, e.call("Edit", m{"file_path": "w.txt", "old_string": "line one\nline two", "new_string": "first\nsecond"}))
	if got, _ := e.read("w.txt"); got != "first\r\nsecond\r\nline three\r\n" {
		t.Errorf("content %q", got)
	}
}

func TestWriteLongName(t *testing.T) {
	e := newEnv(t)
	name := strings.Repeat("n", 250)
	mustOK(t, e.call("Write", m{"file_path": name, "content": "x"}))
	mustOK(t, e.call("Write", m{"file_path": name, "content": "y"}))
	if got, _ := e.read(name); got != "y" {
		t.Errorf("content %q", got)
	}
}

func TestWriteKeepsOwnerWhenRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as another user")
	}
	e := newEnv(t)
	p := e.write("owned.txt", "a")
	if err := os.Chown(p, 12345, 23456); err != nil {
		t.Skip(err)
	}
	mustOK(t, e.call("Write", m{"file_path": "owned.txt", "content": "b"}))
	st, _ := os.Stat(p)
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 12345 || s.Gid != 23456 {
		t.Errorf("owner %d:%d", s.Uid, s.Gid)
	}
}
