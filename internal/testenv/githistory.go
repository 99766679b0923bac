package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// GitHistoryNow is the fixed "now" the fixture's windows are measured from.
func GitHistoryNow() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }

// GitStep is one commit of the fixture.
type GitStep struct {
	When    time.Time
	Author  string // "Name <email>"
	Message string
	Files   map[string]string // path -> content to append
	// Overwrite replaces whole files (to produce deleted lines).
	Overwrite map[string]string
	Binary    map[string][]byte
	Branch    string // commit on this branch (created from the current HEAD if missing)
	Merge     string // merge this branch into main with --no-ff instead of committing files
}

// GitSteps is the standard history: one old commit, two in the previous
// 7-day window, six non-merge commits and one merge in the current one.
func GitSteps() []GitStep {
	d := func(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }
	return []GitStep{
		{When: d(1, 9), Author: "Alice Liddell <alice@example.com>", Message: "chore: init module", Files: map[string]string{"go.mod": "module example.com/x\n"}},
		{When: d(8, 10), Author: "Bob Marley <bob@example.com>", Message: "feat: first parser", Files: map[string]string{"parser/parse.go": lines("p", 6)}},
		{When: d(12, 15), Author: "Alice Liddell <alice@example.com>", Message: "fix: typo in parse", Files: map[string]string{"parser/parse.go": lines("q", 1)}},
		{When: d(15, 9), Author: "Alice Liddell <alice@example.com>", Message: "feat(parser): add tokenizer", Files: map[string]string{"parser/lexer.go": lines("l", 10), "parser/lexer_test.go": lines("t", 5)}},
		{When: d(16, 11), Author: "Bob Marley <bob@example.com>", Message: "fix: handle empty input", Overwrite: map[string]string{"parser/lexer.go": lines("l", 7) + lines("e", 2)}},
		{When: d(17, 14), Author: "Alice Liddell <alice@example.com>", Message: "docs: describe usage", Files: map[string]string{"README.md": lines("r", 3)}},
		{When: d(18, 8), Author: "Carol Danvers <carol@example.com>", Message: "Add CLI flags", Files: map[string]string{"cmd/main.go": lines("m", 4)}, Binary: map[string][]byte{"assets/logo.png": {0x89, 'P', 'N', 'G', 0, 1, 2, 0, 3}}},
		{When: d(19, 10), Author: "Dave Grohl <dave@example.com>", Message: "test: cover lexer", Files: map[string]string{"parser/lexer_test.go": lines("c", 3)}, Branch: "topic"},
		{When: d(19, 16), Author: "Bob Marley <bob@example.com>", Message: "parser: fix crash on unicode", Files: map[string]string{"parser/lexer.go": lines("u", 1), "docs/my notes.md": lines("n", 2)}},
		{When: d(20, 9), Author: "Bob Marley <bob@example.com>", Merge: "topic"},
	}
}

func lines(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(prefix)
		b.WriteString(" line\n")
	}
	return b.String()
}

// MakeGitRepo creates a repository in dir from steps and returns dir. It
// skips the test when git is not installed.
func MakeGitRepo(t testing.TB, dir string, steps []GitStep) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	git := func(when time.Time, author string, args ...string) {
		t.Helper()
		name, email, _ := strings.Cut(author, " <")
		email = strings.TrimSuffix(email, ">")
		full := append([]string{"-c", "user.name=" + name, "-c", "user.email=" + email, "-c", "commit.gpgsign=false",
			"-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"}, args...)
		cmd := exec.Command("git", full...)
		cmd.Dir = dir
		date := when.Format(time.RFC3339)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date,
			"GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(GitHistoryNow(), "T <t@example.com>", "init", "-q")
	for _, s := range steps {
		if s.Merge != "" {
			git(s.When, s.Author, "merge", "-q", "--no-ff", "-m", "Merge branch "+s.Merge, s.Merge)
			continue
		}
		if s.Branch != "" {
			git(s.When, s.Author, "checkout", "-q", "-B", s.Branch)
		}
		for p, content := range s.Files {
			appendFile(t, filepath.Join(dir, p), []byte(content))
		}
		for p, content := range s.Overwrite {
			if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for p, content := range s.Binary {
			appendFile(t, filepath.Join(dir, p), content)
		}
		git(s.When, s.Author, "add", "-A")
		git(s.When, s.Author, "commit", "-q", "-m", s.Message)
		if s.Branch != "" {
			git(s.When, s.Author, "checkout", "-q", "main")
		}
	}
	return dir
}

func appendFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
