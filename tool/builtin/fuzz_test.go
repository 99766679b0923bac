package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
