package tool

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPathRulesMatchResolvedPath: with Read/Write/Edit(public/**), links
// inside the work dir that point into private/ do not open private/.
func TestPathRulesMatchResolvedPath(t *testing.T) {
	work := t.TempDir()
	for _, d := range []string{"public", "private"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"public/ok.txt", "private/x"} {
		if err := os.WriteFile(filepath.Join(work, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"public/l":       "../private/x",   // file link
		"public/d":       "../private",     // directory link
		"public/new":     "../private/new", // dangling: Write would create private/new
		"public/inside":  "ok.txt",         // a link that stays in public/
		"public/outside": "/etc/hostname",  // out of the work dir
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	p := Policy{Mode: ModeDefault, WorkDir: work, Allowed: []string{"Read(public/**)", "Write(public/**)", "Edit(public/**)"}}
	for _, tc := range []struct {
		tool Tool
		path string
		want bool
	}{
		{tRead, "public/ok.txt", true},
		{tRead, "public/inside", true},
		{tWrite, "public/fresh.txt", true},
		{tRead, filepath.Join(work, "public/ok.txt"), true},
		{tRead, "public/l", false},
		{tEdit, "public/l", false},
		{tRead, "public/d/x", false},
		{tWrite, "public/d/created.txt", false},
		{tWrite, "public/new", false},
		{tRead, "public/outside", false},
		{tRead, "private/x", false},
	} {
		if got := p.Decide(tc.tool, in("file_path", tc.path)).Allowed; got != tc.want {
			t.Errorf("%s(%s) allowed = %v, want %v", tc.tool.Spec().Name, tc.path, got, tc.want)
		}
	}
	// A deny rule on private/ also catches the way in through public/.
	deny := Policy{Mode: ModeBypassPermissions, WorkDir: work, Disallowed: []string{"Read(private/**)"}}
	if deny.Decide(tRead, in("file_path", "public/l")).Allowed {
		t.Error("Read(public/l) slipped past Read(private/**) in disallowedTools")
	}
}
