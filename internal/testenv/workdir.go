package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MustRun runs a command in dir with a fixed git identity in its
// environment and fails the test when it fails.
func MustRun(t testing.TB, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// WriteFile writes content to the file name below dir, making its
// directories, and fails the test when it cannot.
func WriteFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TinyGitRepo makes a temporary git repository with one commit of two
// files, main.go and "old name.txt": the work dir of validator tests.
func TinyGitRepo(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	MustRun(t, dir, "git", "init", "-q")
	WriteFile(t, dir, "main.go", "package main\n")
	WriteFile(t, dir, "old name.txt", "x\n")
	MustRun(t, dir, "git", "add", ".")
	MustRun(t, dir, "git", "commit", "-qm", "init")
	return dir
}

// TinyGoModule makes a TinyGitRepo holding a Go module whose test fails
// until Add is fixed (its files are left uncommitted).
func TinyGoModule(t testing.TB) string {
	t.Helper()
	dir := TinyGitRepo(t)
	WriteFile(t, dir, "go.mod", "module example.com/tiny\n\ngo 1.21\n")
	WriteFile(t, dir, "main.go", "package main\n\nfunc Add(a, b int) int { return a - b }\n\nfunc main() {}\n")
	WriteFile(t, dir, "main_test.go", "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 2); got != 4 {\n\t\tt.Errorf(\"Add(2, 2) = %d, want 4 <&>\", got)\n\t}\n}\n")
	return dir
}
