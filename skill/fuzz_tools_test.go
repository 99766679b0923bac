package skill

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzActTools feeds arbitrary inputs to every Act tool, as a model could,
// and checks the confinement: nothing outside the skill is read into a
// result, nothing outside build/ is written, nothing panics.
func FuzzActTools(f *testing.F) {
	outside := f.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.md"), []byte("TOPSECRET\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	seeds := []struct {
		tool  uint8
		input string
	}{
		{1, `{"path":"style.md"}`}, {1, `{"path":"../../secret.md"}`}, {1, `{"path":"**/*.md"}`},
		{2, `{"glob":"../**"}`}, {3, `{"path":"link.md"}`}, {3, `{"path":"/etc/passwd"}`},
		{4, `{"template":"templates/summary.md.tmpl","data":{},"output":"../../x.md"}`},
		{5, `{"schema":"schemas/report.schema.json","path":"../style.md"}`}, {5, `{"schema":{"$ref":"file:///etc/passwd"},"object":{}}`},
		{7, `{"path":"a/b.txt","content":"x"}`}, {7, `{"path":"../escape.txt","content":"x"}`}, {7, `{"path":"link/x","content":"x"}`},
		{8, `{"path":"link.md"}`}, {9, `{"a":"style.md","b":"link.md"}`}, {10, `{"key":"k","value":{"a":1}}`}, {12, `{}`},
	}
	for _, s := range seeds {
		f.Add(s.tool, []byte(s.input))
	}
	f.Fuzz(func(t *testing.T, which uint8, input []byte) {
		sk := exampleSkill(t)
		os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(sk.Root, "link.md"))
		os.Symlink(outside, filepath.Join(sk.Root, "build", "link"))
		before := snapshot(t, sk.Root)
		s, err := newSession(New(Config{Model: &playModel{}}), sk, Input{Goal: "fuzz", Expected: expectReport})
		if err != nil {
			t.Fatal(err)
		}
		tools := s.tools()
		tl := tools[int(which)%len(tools)]
		out := s.apply(context.Background(), tl, json.RawMessage(input))
		if strings.Contains(out.content, "TOPSECRET") {
			t.Fatalf("%s leaked outside content: %s", tl.spec.Name, out.content)
		}
		if !json.Valid([]byte(out.content)) {
			t.Fatalf("%s answered non-JSON: %q", tl.spec.Name, out.content)
		}
		after := snapshot(t, sk.Root)
		for p := range after {
			if !before[p] && p != "build" && !strings.HasPrefix(p, "build/") {
				t.Fatalf("%s created %s outside build/", tl.spec.Name, p)
			}
		}
		entries, _ := os.ReadDir(outside)
		if len(entries) != 1 {
			t.Fatalf("%s wrote into the outside directory", tl.spec.Name)
		}
	})
}

func snapshot(t *testing.T, root string) map[string]bool {
	t.Helper()
	m := map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(root, p)
			m[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	return m
}
