package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestChangeRequestCoversOnlyNamedFiles: a request covers exactly the
// protected files it names and that changed; another changed protected
// file is listed as unrequested and stays a change after Accept; a file
// that is unprotected or unchanged makes the request invalid.
func TestTestChangeRequestCoversOnlyNamedFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a_test.go", "want(6)\n")
	write(t, dir, "b_test.go", "want(1)\n")
	write(t, dir, "gone_test.go", "old\n")
	write(t, dir, "a.go", "code\n")
	m, err := NewGlobMatcher([]string{"**/*_test.go"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := TakeFilesBaseline(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	g := &ProtectedFilesGuard{Baseline: b, Dir: dir}
	write(t, dir, "a_test.go", "want(5)\n")
	write(t, dir, "b_test.go", "want(0)\n") // smuggled: not named
	write(t, dir, "new_test.go", "added\n")
	os.Remove(filepath.Join(dir, "gone_test.go"))

	req, invalid, err := g.Request(3, []string{"./a_test.go", "new_test.go", "gone_test.go"}, "the spec says 5")
	if err != nil || len(invalid) != 0 {
		t.Fatalf("%v %v", invalid, err)
	}
	if got := strings.Join(req.Paths(), ","); got != "a_test.go,new_test.go,gone_test.go" {
		t.Fatalf("paths %s", got)
	}
	if req.Files[0].Kind != Modified || !strings.Contains(req.Files[0].Diff, "+want(5)") || req.Files[0].File.Content != "want(5)\n" ||
		req.Files[1].Kind != Added || req.Files[2].Kind != Deleted {
		t.Fatalf("files %+v", req.Files)
	}
	if len(req.Unrequested) != 1 || req.Unrequested[0] != "modified: b_test.go" {
		t.Fatalf("unrequested %v", req.Unrequested)
	}
	AcceptChanges(b, req.Files)
	ch, err := CheckProtected(b, dir)
	if err != nil || len(ch) != 1 || ch[0].Path != "b_test.go" {
		t.Fatalf("after accepting, changes %v %v", ch, err)
	}
	// A change after the approval to an approved file fails again.
	write(t, dir, "a_test.go", "want(7)\n")
	if ch, _ := CheckProtected(b, dir); len(ch) != 2 || ch[0].Path != "a_test.go" {
		t.Fatalf("a later change: %v", ch)
	}

	_, invalid, err = g.Request(4, []string{"a.go", "missing_test.go", "../outside_test.go"}, "")
	if err != nil || len(invalid) != 3 || !strings.Contains(invalid[0], "not a protected file") || !strings.Contains(invalid[1], "unchanged") {
		t.Fatalf("invalid %v %v", invalid, err)
	}
}
