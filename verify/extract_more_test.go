package verify

import (
	"github.com/capstan-dev/capstan/event"
	"reflect"
	"strings"
	"testing"
)

func TestStagedAndUnstagedFiles(t *testing.T) {
	out := "M  staged.go\n M unstaged.go\nMM both.go\nR  old.go -> new.go\nA  added.go\n D deleted.go\n?? untracked.go\n!! ignored.go\n"
	if got, want := ParseStagedFiles(out), []string{"staged.go", "both.go", "new.go", "added.go"}; !reflect.DeepEqual(got, want) {
		t.Errorf("staged = %q, want %q", got, want)
	}
	if got, want := ParseUnstagedFiles(out), []string{"unstaged.go", "both.go", "deleted.go"}; !reflect.DeepEqual(got, want) {
		t.Errorf("unstaged = %q, want %q", got, want)
	}
}

func TestExtractFiles(t *testing.T) {
	out := "src/a.ts:12:5 - error TS2322: Type 'x'\n" +
		"src/b.ts(3,1): error TS1005: ';' expected.\n" +
		"./pkg/x.go:7:2: undefined: y\n" +
		"node_modules/lib/index.d.ts:1:1 - error TS1\n" +
		"error: Uncaught (in promise) at file:///repo/main.ts:4:9\n" +
		"src/a.ts:40:1 - error TS2304\n" +
		"see the docs at https://example.com/page.html for details\n"
	got := ExtractFiles(out)
	want := []string{"src/a.ts", "src/b.ts", "./pkg/x.go", "/repo/main.ts"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
	if got := ExtractFiles("all good\n"); len(got) != 0 || got == nil {
		t.Errorf("no files: %#v", got)
	}
}

func TestGenerateDiff(t *testing.T) {
	gofmt := "diff a.go.orig a.go\n--- a.go.orig\n+++ a.go\n@@ -1 +1 @@\n-x  :=1\n+x := 1\n"
	if got := GenerateDiff("some preamble\n" + gofmt); got != strings.TrimRight(gofmt, "\n") {
		t.Errorf("gofmt -d: %q", got)
	}
	if got := GenerateDiff("a.go\nb/c.go\n"); got != "Files needing format:\n  - a.go\n  - b/c.go" {
		t.Errorf("gofmt -l: %q", got)
	}
	if got := GenerateDiff(""); got != "No formatting issues found." {
		t.Errorf("clean: %q", got)
	}
}

func TestBranchRemoteMergeStatus(t *testing.T) {
	noUp := event.ValidatorOutput{Stderr: "fatal: no upstream configured for branch 'feat/x'\n", ExitCode: 128}
	if got := ParseBranchName(JoinedOutput(noUp)); got != "feat/x" {
		t.Errorf("branch = %q", got)
	}
	if got := ParseRemoteStatus(noUp); got != "no upstream" {
		t.Errorf("remote = %q", got)
	}
	up := event.ValidatorOutput{Stdout: "origin/feat/x\n"}
	if got := ParseBranchName(up.Stdout); got != "origin/feat/x" {
		t.Errorf("branch = %q", got)
	}
	if got := ParseRemoteStatus(up); got != "tracking origin/feat/x" {
		t.Errorf("remote = %q", got)
	}
	st := event.ValidatorOutput{Stdout: "## main...origin/main [ahead 2, behind 1]\n M a.go\n"}
	if got := ParseBranchName(st.Stdout); got != "main" {
		t.Errorf("branch = %q", got)
	}
	if got := ParseRemoteStatus(st); got != "tracking origin/main, ahead 2, behind 1" {
		t.Errorf("remote = %q", got)
	}
	if got := ParseRemoteStatus(event.ValidatorOutput{Stdout: "## main...origin/main [gone]\n"}); got != "upstream gone" {
		t.Errorf("gone = %q", got)
	}
	if got := ParseRemoteStatus(event.ValidatorOutput{Stderr: "fatal: not a git repository (or any of the parent directories): .git\n", ExitCode: 128}); got != "not a git repository" {
		t.Errorf("no repo = %q", got)
	}
	if got := ParseMergeStatus(event.ValidatorOutput{}); got != "merged" {
		t.Errorf("merged = %q", got)
	}
	if got := ParseMergeStatus(event.ValidatorOutput{Stdout: "abc123 fix\ndef456 feat\n"}); got != "2 commits not merged:\nabc123 fix\ndef456 feat" {
		t.Errorf("unmerged = %q", got)
	}
	if got := ParseMergeStatus(event.ValidatorOutput{Stderr: "fatal: bad revision 'origin/develop..HEAD'\n", ExitCode: 128}); got != "fatal: bad revision 'origin/develop..HEAD'" {
		t.Errorf("failed = %q", got)
	}
}

func TestErrorOutput(t *testing.T) {
	if got := ErrorOutput(event.ValidatorOutput{Stdout: "ok", Stderr: " boom \n"}); got != "boom" {
		t.Errorf("stderr: %q", got)
	}
	if got := ErrorOutput(event.ValidatorOutput{Stdout: "=== RUN TestA\n--- FAIL: TestA\n    a_test.go:3: nope\nFAIL\n"}); got != "--- FAIL: TestA\n    a_test.go:3: nope\nFAIL" {
		t.Errorf("stdout: %q", got)
	}
}

// Every alias is accepted and answers as the extractor it names.
func TestExtractorAliases(t *testing.T) {
	out := event.ValidatorOutput{Stdout: "--- FAIL: TestX (0.00s)\n    x_test.go:9: bad\nFAIL\na.go:1:2: lint msg (errcheck)\n", ExitCode: 1}
	names := Extractors()
	for alias, target := range extractorAliases {
		if !contains(names, alias) {
			t.Errorf("Extractors() lacks alias %s", alias)
		}
		a, ok1 := Extract(alias, out)
		b, ok2 := Extract(target, out)
		if !ok1 || !ok2 || !reflect.DeepEqual(a, b) {
			t.Errorf("%s = %v (%v), %s = %v (%v)", alias, a, ok1, target, b, ok2)
		}
	}
	if _, ok := Extract("parseNothing", out); ok {
		t.Error("unknown extractor accepted")
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func FuzzExtractFiles(f *testing.F) {
	f.Add("src/a.ts:1:2 - error\nnode_modules/x.js:3\n")
	f.Add("a.ts(1,2): x\n")
	f.Fuzz(func(t *testing.T, s string) {
		seen := map[string]bool{}
		for _, p := range ExtractFiles(s) {
			if p == "" || seen[p] || !strings.Contains(strings.ReplaceAll(s, "file://", " "), p) || strings.Contains("/"+p, "/node_modules/") {
				t.Fatalf("bad file %q from %q", p, s)
			}
			seen[p] = true
		}
		if GenerateDiff(s) == "" {
			t.Fatalf("empty diff text for %q", s)
		}
	})
}

func FuzzGitStatusExtractors(f *testing.F) {
	f.Add("## main...origin/main [ahead 1]\nMM a\nR  b -> c\n", "fatal: no upstream configured for branch 'x'", 1)
	f.Add("origin/x\n", "", 0)
	f.Fuzz(func(t *testing.T, stdout, stderr string, code int) {
		o := event.ValidatorOutput{Stdout: stdout, Stderr: stderr, ExitCode: code}
		for _, p := range append(ParseStagedFiles(stdout), ParseUnstagedFiles(stdout)...) {
			if p == "" && !strings.Contains(stdout, "->") {
				t.Fatalf("empty path from %q", stdout)
			}
		}
		if b := ParseBranchName(JoinedOutput(o)); strings.ContainsAny(b, "\n ") {
			t.Fatalf("branch %q spans words", b)
		}
		ParseRemoteStatus(o)
		if code == 0 && strings.TrimSpace(stdout) == "" && ParseMergeStatus(o) != "merged" {
			t.Fatal("no commits but not merged")
		}
		ErrorOutput(o)
	})
}
