package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

func TestCheckFindsChangedDeletedAndAddedFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a_test.go", "package a\n\nfunc TestA() { want(5) }\n")
	write(t, dir, "sub/b_test.go", "package b\n")
	write(t, dir, "a.go", "package a\n")
	write(t, dir, "bin_test.go", "\xff\xfe")
	write(t, dir, ".git/x_test.go", "git internals are not protected")
	write(t, dir, ".capstan/runs/r/x_test.go", "journals are not protected")
	m, err := NewGlobMatcher([]string{"**/*_test.go", "go.mod"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := TakeFilesBaseline(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Files) != 3 || !b.Files["a_test.go"].HasContent || b.Files["bin_test.go"].HasContent || !strings.HasPrefix(b.Files["sub/b_test.go"].Digest, "sha256:") {
		t.Fatalf("baseline %+v", b.Files)
	}
	if ch, err := CheckProtected(b, dir); err != nil || len(ch) != 0 {
		t.Fatalf("unchanged tree: %v %v", ch, err)
	}
	// Unprotected files, .git and the journals may change freely.
	write(t, dir, "a.go", "package a // fixed\n")
	write(t, dir, ".git/x_test.go", "changed")
	write(t, dir, ".capstan/runs/r/y_test.go", "new")
	if ch, _ := CheckProtected(b, dir); len(ch) != 0 {
		t.Fatalf("unprotected changes reported: %v", ch)
	}
	write(t, dir, "a_test.go", "package a\n\nfunc TestA() { want(-1) }\n")
	os.Remove(filepath.Join(dir, "sub/b_test.go"))
	write(t, dir, "go.mod", "module x\n")
	write(t, dir, "bin_test.go", "\xff\xfd")
	ch, err := CheckProtected(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ch {
		got = append(got, c.String())
	}
	if strings.Join(got, "; ") != "modified: a_test.go; modified: bin_test.go; added: go.mod; deleted: sub/b_test.go" {
		t.Fatalf("changes %v", got)
	}
	if !strings.Contains(ch[0].Diff, "-func TestA() { want(5) }") || !strings.Contains(ch[0].Diff, "+func TestA() { want(-1) }") || ch[1].Diff != "" {
		t.Fatalf("diffs %q %q", ch[0].Diff, ch[1].Diff)
	}

	// The guard turns them into the protected-changed failure.
	g := &ProtectedFilesGuard{Baseline: b, Dir: dir}
	vr, err := g.Check(context.Background())
	if err != nil || vr.Valid || vr.Pattern != PatternProtectedChanged || vr.Validator != ProtectedFilesGuardName {
		t.Fatalf("%+v %v", vr, err)
	}
	if files, _ := vr.Params["protectedFiles"].([]string); len(files) != 4 || !strings.Contains(vr.Params["diff"].(string), "(binary or too large to show)") {
		t.Fatalf("params %+v", vr.Params)
	}
	// A step baseline adds its own changes; a file in both is named once.
	write(t, dir, "a.go", "package a // step\n")
	sm, _ := NewGlobMatcher([]string{"*.go"})
	sb, err := TakeFilesBaseline(dir, sm)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.go", "package a // changed in the step\n")
	g.Step = sb
	vr, err = g.Check(context.Background())
	if files, _ := vr.Params["protectedFiles"].([]string); err != nil || len(files) != 5 || files[0] != "modified: a.go" ||
		!strings.Contains(vr.Params["restore"].(string), "(**/*_test.go, go.mod, *.go)") {
		t.Fatalf("with a step baseline: %+v %v", vr.Params, err)
	}
	if vr, err := (&ProtectedFilesGuard{Dir: dir}).Check(context.Background()); err != nil || !vr.Valid {
		t.Fatalf("guard without baselines: %+v %v", vr, err)
	}
}

func TestSymlinkIsRecordedNotFollowed(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "real.txt", "x")
	if err := os.Symlink("real.txt", filepath.Join(dir, "link_test.go")); err != nil {
		t.Fatal(err)
	}
	m, _ := NewGlobMatcher([]string{"*_test.go"})
	b, err := TakeFilesBaseline(dir, m)
	if err != nil || b.Files["link_test.go"].Content != "symlink -> real.txt" {
		t.Fatalf("%+v %v", b, err)
	}
	os.Remove(filepath.Join(dir, "link_test.go"))
	os.Symlink("a.go", filepath.Join(dir, "link_test.go"))
	if ch, _ := CheckProtected(b, dir); len(ch) != 1 || ch[0].Kind != Modified {
		t.Fatalf("retargeted link: %v", ch)
	}
}

func TestMatcher(t *testing.T) {
	if _, err := NewGlobMatcher([]string{"tests/[ab"}); agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation {
		t.Fatalf("bad glob: %v", err)
	}
	m, _ := NewGlobMatcher([]string{"**/*_test.go", "conftest.py", "tests/**"})
	for p, want := range map[string]bool{"a_test.go": true, "x/y/a_test.go": true, "./a_test.go": true, "conftest.py": true,
		"sub/conftest.py": false, "tests/data/x.json": true, "a.go": false} {
		if m.Match(p) != want {
			t.Errorf("Match(%q) = %v", p, !want)
		}
	}
	var none *GlobMatcher
	if none.Match("a_test.go") {
		t.Error("nil matcher protects")
	}
}

// The files of an installed package keep their digest only (a change is
// still found), those of node_modules/.bin and the rest their content.
func TestInstalledPackagesAreHashedNotKept(t *testing.T) {
	dir := t.TempDir()
	for p, body := range map[string]string{"node_modules/expect/build/matchers.js": "const pass = Object.is(received, expected);\n",
		"web/node_modules/@jest/core/index.js": "module.exports = {};\n", "node_modules/.bin/jest": "#!/bin/sh\n", "sum.test.js": "test('adds', () => {});\n"} {
		write(t, dir, p, body)
	}
	b := takeBaseline(t, dir, "**/node_modules/**", "node_modules/.bin/**", "*.test.js")
	for p, kept := range map[string]bool{"node_modules/expect/build/matchers.js": false, "web/node_modules/@jest/core/index.js": false,
		"node_modules/.bin/jest": true, "sum.test.js": true} {
		if f, ok := b.Files[p]; !ok || f.HasContent != kept || !strings.HasPrefix(f.Digest, "sha256:") {
			t.Errorf("%s: %+v (content kept: want %v)", p, f, kept)
		}
	}
	write(t, dir, "node_modules/expect/build/matchers.js", "const pass = true;\n")
	if ch, err := CheckProtected(b, dir); err != nil || len(ch) != 1 || ch[0].Path != "node_modules/expect/build/matchers.js" || ch[0].Kind != Modified {
		t.Fatalf("%+v %v", ch, err)
	}
}

// A file larger than MaxContentBytes is hashed as a stream: its digest is
// the whole file's, its content is not kept, and a change is still found.
func TestLargeFilesAreHashedNotKept(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("x", MaxContentBytes+10)
	write(t, dir, "big_test.go", big)
	b := takeBaseline(t, dir, "*_test.go")
	sum := sha256.Sum256([]byte(big))
	if f := b.Files["big_test.go"]; f.HasContent || f.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("%+v", f)
	}
	write(t, dir, "big_test.go", big[:len(big)-1]+"y")
	if ch, err := CheckProtected(b, dir); err != nil || len(ch) != 1 || ch[0].Kind != Modified || ch[0].Diff != "" {
		t.Fatalf("%+v %v", ch, err)
	}
}

// takeBaseline is TakeFilesBaseline of dir with globs, failing the test on
// an error.
func takeBaseline(t *testing.T, dir string, globs ...string) *event.ProtectBaseline {
	t.Helper()
	m, err := NewGlobMatcher(globs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := TakeFilesBaseline(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
