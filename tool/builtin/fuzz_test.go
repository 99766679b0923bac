package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/tool"
)

// FuzzResolve feeds arbitrary paths to the confinement resolver and the
// file tools over a work dir full of links: a resolved path must stay
// inside, and no tool output may ever show the outside secret.
func FuzzResolve(f *testing.F) {
	base := f.TempDir()
	work, outside := filepath.Join(base, "work"), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(work, "sub/dir"), 0o755)
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP-SECRET"), 0o644)
	os.WriteFile(filepath.Join(work, "sub/ok.txt"), []byte("fine"), 0o644)
	links := map[string]string{
		"out":         outside,
		"rel-out":     "../outside",
		"sub/up":      "..",
		"sub/upup":    "../..",
		"sub/dir/lnk": "../ok.txt",
		"root":        "/",
		"self":        ".",
		"loop":        "loop",
		"abs-in":      filepath.Join(work, "sub"),
	}
	for name, target := range links {
		os.Symlink(target, filepath.Join(work, name))
	}
	tools, err := New(Config{WorkDir: work})
	if err != nil {
		f.Fatal(err)
	}
	ws, _ := newWorkspace(work)
	for _, seed := range []string{"sub/ok.txt", "../outside/secret.txt", "out/secret.txt", "sub/up/out/secret.txt",
		"sub/upup/outside/secret.txt", "self/self/sub/dir/lnk", "abs-in/../out", "root/etc", "loop/x", "/", work, "a//b/./c/..", "sub/up/sub/up"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := ws.resolve(p)
		if err == nil {
			full := filepath.Join(ws.root, rel)
			if _, ok := within(ws.root, full); !ok {
				t.Fatalf("resolve(%q) = %q escapes", p, rel)
			}
			if real, err := filepath.EvalSymlinks(full); err == nil {
				if _, ok := within(ws.root, real); !ok {
					t.Fatalf("resolve(%q) = %q really is %s", p, rel, real)
				}
			}
		}
		for _, tl := range tools {
			var in map[string]any
			switch tl.Spec().Name {
			case NameRead:
				in = map[string]any{"file_path": p}
			case NameGrep:
				in = map[string]any{"pattern": "SECRET", "path": p, "output_mode": "content"}
			case NameGlob:
				in = map[string]any{"pattern": p}
			default:
				continue
			}
			raw, _ := json.Marshal(in)
			res, err := tl.Run(context.Background(), raw)
			if err != nil {
				t.Fatalf("%s(%q): %v", tl.Spec().Name, p, err)
			}
			if strings.Contains(res.Content, "TOP-SECRET") || strings.Contains(res.Content, "secret.txt") && !res.IsError {
				t.Fatalf("%s(%q) reached outside: %s", tl.Spec().Name, p, res.Content)
			}
		}
	})
}

// FuzzReadLine compares Read's line reader with a direct split of the input.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("a\nbb\r\nccc"), uint8(2), uint8(16))
	f.Add([]byte("ééé\n"), uint8(3), uint8(16))
	f.Add([]byte("\r\r\n\n"), uint8(1), uint8(16))
	f.Fuzz(func(t *testing.T, data []byte, max8, size8 uint8) {
		max := int(max8%64) + 1
		size := int(size8%64) + 16
		var want []string
		rest := string(data)
		for rest != "" {
			line, tail, found := strings.Cut(rest, "\n")
			if !found {
				tail = ""
			}
			rest = tail
			line = strings.TrimSuffix(line, "\r")
			if len(line) > max {
				line = line[:runeStart(line, max)] + " … [line cut]"
			}
			want = append(want, line)
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), size)
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
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("max %d: got %q want %q", max, got, want)
		}
	})
}

// FuzzToolInput feeds arbitrary bytes as tool input to every built-in tool
// (Bash through a recording runner): no panic, no Go error, and nothing
// outside the work dir is changed.
func FuzzToolInput(f *testing.F) {
	base := f.TempDir()
	work, outside := filepath.Join(base, "work"), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(work, "src"), 0o755)
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP-SECRET"), 0o644)
	os.WriteFile(filepath.Join(work, "src/a.go"), []byte("package a\n"), 0o644)
	os.Symlink(outside, filepath.Join(work, "out"))
	var ran []tool.CommandSpec
	rec := runnerFunc(func(_ context.Context, s tool.CommandSpec) (tool.CommandResult, error) {
		ran = append(ran, s)
		return tool.CommandResult{Output: "ok"}, nil
	})
	tools, err := New(Config{WorkDir: work, Runner: rec})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"file_path":"src/a.go"}`, `{"file_path":"out/secret.txt","content":"x"}`,
		`{"file_path":"src/a.go","old_string":"package","new_string":"pkg","replace_all":true}`,
		`{"command":"ls","timeout":1e300}`, `{"command":"ls","timeout":1e-300}`, `{"pattern":"**/*","path":"out"}`,
		`{"pattern":"(?i)a","output_mode":"count","-C":3,"head_limit":1}`, `[]`, `null`, `{"file_path":null}`,
	} {
		for i := range tools {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, input []byte) {
		tl := tools[int(which)%len(tools)]
		res, err := tl.Run(context.Background(), input)
		if err != nil {
			t.Fatalf("%s(%q) returned a Go error: %v", tl.Spec().Name, input, err)
		}
		if strings.Contains(res.Content, "TOP-SECRET") {
			t.Fatalf("%s(%q) read outside", tl.Spec().Name, input)
		}
		entries, _ := os.ReadDir(outside)
		if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); len(entries) != 1 || string(b) != "TOP-SECRET" {
			t.Fatalf("%s(%q) changed the outside dir", tl.Spec().Name, input)
		}
		for _, s := range ran {
			for _, kv := range s.Env {
				if k, _, _ := strings.Cut(kv, "="); proc.IsSecretName(k) {
					t.Fatalf("secret %s passed to the runner", k)
				}
			}
			if s.Timeout <= 0 || s.Timeout > MaxBashTimeout {
				t.Fatalf("timeout %v", s.Timeout)
			}
		}
		ran = ran[:0]
	})
}
