package verify

import (
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"
)

// ParseStagedFiles returns the files with changes in the index (the X
// column of `git status --porcelain` v1 is a change); renames give their
// new path.
func ParseStagedFiles(s string) []string {
	return porcelain(s, func(xy string) bool { return xy[0] != ' ' && xy[0] != '?' && xy[0] != '!' })
}

// ParseUnstagedFiles returns the tracked files with changes in the work
// tree that are not staged (the Y column of `git status --porcelain` v1 is
// a change).
func ParseUnstagedFiles(s string) []string {
	return porcelain(s, func(xy string) bool { return xy[1] != ' ' && xy[1] != '?' && xy[1] != '!' })
}

// fileRef is a file path with an extension followed by a line number, as
// compilers, linters and test runners print them: "src/a.ts:12",
// "pkg/x.go:3:4", "a.ts(12,5)".
var fileRef = lazyre.New(`(?:^|[\s'"(\[])((?:\.{0,2}/|/)?(?:[\w@.+-]+/)*[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]*)(?::\d+|\(\d+)`)

// ExtractFiles returns the files a diagnostic output refers to
// ("file.ext:LINE" or "file.ext(LINE"), each once in order of first
// appearance, leaving out dependency trees (node_modules, vendor). A
// file:// URL counts as its path.
func ExtractFiles(s string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, l := range lines(s) {
		for _, m := range fileRef().FindAllStringSubmatch(strings.ReplaceAll(l, "file://", " "), -1) {
			f := m[1]
			if seen[f] || strings.Contains("/"+f, "/node_modules/") || strings.HasPrefix(f, "vendor/") {
				continue
			}
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// GenerateDiff turns a formatter check's output into text for a retry
// prompt: the unified diff it printed (gofmt -d, rustfmt --check, black
// --diff, ruff format --diff, deno fmt --check) when there is one,
// otherwise the list of files that need formatting, or "No formatting
// issues found." when it names none.
func GenerateDiff(s string) string {
	ls := lines(s)
	for i, l := range ls {
		if strings.HasPrefix(l, "diff ") || strings.HasPrefix(l, "--- ") && i+1 < len(ls) && strings.HasPrefix(ls[i+1], "+++ ") ||
			strings.HasPrefix(l, "Diff in ") || strings.HasPrefix(l, "from ") && strings.HasSuffix(strings.TrimSpace(l), ":") {
			return strings.TrimRight(strings.Join(ls[i:], "\n"), "\n")
		}
	}
	files := ParseFormatOutput(s)
	if len(files) == 0 {
		return "No formatting issues found."
	}
	return "Files needing format:\n  - " + strings.Join(files, "\n  - ")
}

var (
	noUpstream    = lazyre.New(`no upstream (?:configured )?for branch '([^'\s]+)'`)
	statusBranch  = lazyre.New(`^## (?:No commits yet on )?([^.\s]+(?:\.[^.\s]+)*?)(?:\.\.\.(\S+))?(?: \[(.*)\])?$`)
	onBranch      = lazyre.New(`^On branch (\S+)`)
	refLine       = lazyre.New(`^(?:refs/(?:heads|remotes)/)?([\w./-]+)$`)
	aheadBehind   = lazyre.New(`(ahead|behind) (\d+)`)
	gitNotARepo   = "not a git repository"
	remoteGoneTag = "gone"
)

// ParseBranchName finds the branch a git command talked about: "no
// upstream configured for branch 'X'" (git rev-parse @{u}, git push),
// "## X...origin/X" (git status -b --porcelain), "On branch X" (git
// status), or an output that is one ref ("origin/X" from git rev-parse
// --abbrev-ref @{u}, "X" from git branch --show-current). "" when none.
func ParseBranchName(s string) string {
	for _, l := range lines(s) {
		l = strings.TrimSpace(l)
		if m := noUpstream().FindStringSubmatch(l); m != nil {
			return m[1]
		}
		if m := statusBranch().FindStringSubmatch(l); m != nil {
			return m[1]
		}
		if m := onBranch().FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	var nonEmpty []string
	for _, l := range lines(s) {
		if t := strings.TrimSpace(l); t != "" {
			nonEmpty = append(nonEmpty, t)
		}
	}
	if len(nonEmpty) == 1 {
		if m := refLine().FindStringSubmatch(nonEmpty[0]); m != nil && m[1] != "HEAD" {
			return m[1]
		}
	}
	return ""
}

// ParseRemoteStatus says in one line how the branch relates to its
// upstream, from git rev-parse --abbrev-ref @{u} or git status -b
// --porcelain output: "no upstream", "upstream gone", "tracking
// origin/X", "tracking origin/X, ahead 2, behind 1", "not a git
// repository", or the command's first error line.
func ParseRemoteStatus(o event.ValidatorOutput) string {
	all := JoinedOutput(o)
	if strings.Contains(all, gitNotARepo) {
		return "not a git repository"
	}
	if noUpstream().MatchString(all) {
		return "no upstream"
	}
	for _, l := range lines(o.Stdout) {
		if m := statusBranch().FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			switch {
			case m[2] == "":
				return "no upstream"
			case m[3] == remoteGoneTag:
				return "upstream gone"
			}
			status := "tracking " + m[2]
			for _, ab := range aheadBehind().FindAllStringSubmatch(m[3], -1) {
				status += ", " + ab[1] + " " + ab[2]
			}
			return status
		}
	}
	if b := ParseBranchName(o.Stdout); b != "" && o.ExitCode == 0 {
		return "tracking " + b
	}
	for _, l := range lines(o.Stderr) {
		if t := strings.TrimSpace(l); t != "" {
			return t
		}
	}
	return ""
}

// ParseMergeStatus summarizes `git log BASE..HEAD --oneline` (the commits
// of the branch its base does not have): "merged" when there are none,
// else "N commit(s) not merged" followed by the commits, one per line;
// a failed command gives its first error line.
func ParseMergeStatus(o event.ValidatorOutput) string {
	if o.ExitCode != 0 {
		for _, l := range lines(o.Stderr) {
			if t := strings.TrimSpace(l); t != "" {
				return t
			}
		}
		return fmt.Sprintf("git exited with status %d", o.ExitCode)
	}
	var commits []string
	for _, l := range lines(o.Stdout) {
		if t := strings.TrimSpace(l); t != "" {
			commits = append(commits, t)
		}
	}
	if len(commits) == 0 {
		return "merged"
	}
	noun := "commits"
	if len(commits) == 1 {
		noun = "commit"
	}
	return fmt.Sprintf("%d %s not merged:\n%s", len(commits), noun, strings.Join(commits, "\n"))
}

// ErrorOutput is the part of a failed command's output that explains the
// failure: its stderr when it wrote any, else its stdout from the first
// line that reports a failure (FAIL, FAILED, error:, Error:, panic:),
// else its whole stdout, trimmed.
func ErrorOutput(o event.ValidatorOutput) string {
	if t := strings.TrimSpace(o.Stderr); t != "" {
		return t
	}
	ls := lines(o.Stdout)
	for i, l := range ls {
		if strings.Contains(l, "FAIL") || strings.Contains(l, "error:") || strings.Contains(l, "Error:") || strings.HasPrefix(l, "panic:") {
			return strings.TrimSpace(strings.Join(ls[i:], "\n"))
		}
	}
	return strings.TrimSpace(o.Stdout)
}

// python -m unittest: "FAIL: test_add (tests.test_calc.T.test_add)" (3.11
// and later name the method in the id; earlier ones end it with the
// class), then the traceback, whose last line is the error, up to the
// next separator line.
var (
	unittestHeader    = lazyre.New(`^(FAIL|ERROR): (\S+) \(([^)\s]+)\)`)
	unittestSeparator = lazyre.New(`^(-{20,}|={20,})$`)
)

func parseUnittestFailures(ls []string, acc *failures) {
	for i := 0; i < len(ls); i++ {
		m := unittestHeader().FindStringSubmatch(ls[i])
		if m == nil {
			continue
		}
		method, id := m[2], m[3]
		name := id
		if !strings.HasSuffix(id, "."+method) {
			name = id + "." + method
		}
		msg := ""
		j := i + 1
		if j < len(ls) && unittestSeparator().MatchString(ls[j]) {
			j++
		}
		for ; j < len(ls) && !unittestSeparator().MatchString(ls[j]); j++ {
			if t := strings.TrimSpace(ls[j]); t != "" {
				msg = t
			}
		}
		acc.add(name, msg)
		i = j - 1
	}
}
