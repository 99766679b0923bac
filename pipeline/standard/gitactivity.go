package standard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/proc"
)

// Window is a time range [Since, Until] on committer time, in UTC.
type Window struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// Previous returns the window of the same length that ends where w starts.
func (w Window) Previous() Window {
	return Window{Since: w.Since.Add(-w.Until.Sub(w.Since)), Until: w.Since}
}

// String renders the window as "2026-11-14T09:00:00Z..2026-11-21T09:00:00Z".
func (w Window) String() string {
	return w.Since.UTC().Format(time.RFC3339) + ".." + w.Until.UTC().Format(time.RFC3339)
}

var relRe = lazyre.New(`^(\d{1,4})([hdwmy])$`)

// ParseSince turns a relative window ("36h", "7d", "2w", "3m" for three
// calendar months, "1y" for one calendar year), "YYYY-MM-DD" (midnight UTC)
// or an RFC 3339 time into the window from that moment to now. The start
// must be before now and at most 20 years back.
func ParseSince(s string, now time.Time) (Window, error) {
	s = strings.TrimSpace(s)
	now = now.UTC()
	var since time.Time
	if m := relRe().FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		switch m[2] {
		case "h":
			since = now.Add(-time.Duration(n) * time.Hour)
		case "d":
			since = now.AddDate(0, 0, -n)
		case "w":
			since = now.AddDate(0, 0, -7*n)
		case "m":
			since = now.AddDate(0, -n, 0)
		case "y":
			since = now.AddDate(-n, 0, 0)
		}
	} else if t, err := time.Parse("2006-01-02", s); err == nil {
		since = t.UTC()
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		since = t.UTC()
	} else {
		return Window{}, fmt.Errorf("since %q: want a relative window like 36h, 7d, 2w, 3m (months) or 1y, a date YYYY-MM-DD, or an RFC 3339 time", s)
	}
	if !since.Before(now) {
		return Window{}, fmt.Errorf("since %q: %s is not before now (%s)", s, since.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	if now.AddDate(-20, 0, 0).After(since) {
		return Window{}, fmt.Errorf("since %q: more than 20 years back", s)
	}
	return Window{Since: since, Until: now}, nil
}

// FileChange is one file of a commit, from git's --numstat.
type FileChange struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// Commit is one non-merge commit.
type Commit struct {
	Hash         string       `json:"hash"`
	Author       string       `json:"author"`
	Email        string       `json:"email"`
	AuthorTime   time.Time    `json:"author_time"`
	CommitTime   time.Time    `json:"commit_time"`
	Subject      string       `json:"subject"`
	Type         string       `json:"type"`
	Conventional bool         `json:"conventional"`
	Files        []FileChange `json:"files"`
}

// Added is the number of lines the commit added.
func (c Commit) Added() int {
	n := 0
	for _, f := range c.Files {
		n += f.Added
	}
	return n
}

// Deleted is the number of lines the commit deleted.
func (c Commit) Deleted() int {
	n := 0
	for _, f := range c.Files {
		n += f.Deleted
	}
	return n
}

// LogFormat is the --format given to git log: one header line per commit
// that starts with a NUL byte and separates its fields with NUL bytes. The
// author name and email are the ones .mailmap maps them to (%aN, %aE), so
// one person committing under several identities counts once. Git
// identities and subjects cannot contain NUL or newlines, and --numstat
// lines contain no NUL (unusual paths are C-quoted), so any author name or
// subject parses unambiguously.
const LogFormat = "%x00%H%x00%aN%x00%aE%x00%aI%x00%cI%x00%s"

// LogArgs returns the git arguments Log uses for repo and w (exported so
// users can see exactly what ran, and tests can compare with git).
func LogArgs(repo string, w Window) []string {
	return []string{
		"-c", "core.quotePath=false", "-c", "log.showSignature=false", "-c", "color.ui=false",
		"-C", repo, "log", "--no-merges", "--no-renames", "--numstat", "--no-ext-diff", "--no-textconv",
		"--format=" + LogFormat,
		"--since=" + w.Since.UTC().Format(time.RFC3339),
		"--until=" + w.Until.UTC().Format(time.RFC3339),
	}
}

// CheckRepo fails with a GIT error unless repo is inside a git work tree
// (or is a bare repository).
func CheckRepo(ctx context.Context, repo string) error {
	if _, err := runGit(ctx, repo, "rev-parse", "--git-dir"); err != nil {
		if agenterr.CodeOf(err) == agenterr.CodeDependencyResolution {
			return err // git itself is refused (inside the repository) or missing
		}
		e := agenterr.Wrap(err, agenterr.CodeGit, agenterr.LayerPipeline, false, "%s is not a git repository", repo)
		e.Hint = "pass --repo with the path of a local git repository"
		return e
	}
	return nil
}

// Log runs git log on repo for the window and parses its output. A
// repository without commits yields no commits. In a shallow clone the
// window must end after its oldest commit: git shows that boundary commit
// as adding every file of the tree, and the commits before it are missing,
// so a window that reaches it fails with a GIT error instead of counting
// wrong numbers.
func Log(ctx context.Context, repo string, w Window) ([]Commit, error) {
	if err := CheckRepo(ctx, repo); err != nil {
		return nil, err
	}
	if _, err := runGit(ctx, repo, "rev-parse", "--verify", "-q", "HEAD"); err != nil {
		return nil, nil // no commits yet
	}
	if err := checkShallow(ctx, repo, w); err != nil {
		return nil, err
	}
	out, err := runGit(ctx, repo, withoutDir(LogArgs(repo, w))...)
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeGit, agenterr.LayerPipeline, true, "git log in %s", repo)
	}
	return ParseLog(out)
}

// checkShallow refuses a window that reaches the history cut of a shallow
// clone: the boundary commits (those whose parents were not fetched) must
// all be older than the window's start.
func checkShallow(ctx context.Context, repo string, w Window) error {
	out, err := runGit(ctx, repo, "rev-parse", "--is-shallow-repository")
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		return nil
	}
	path, err := runGit(ctx, repo, "rev-parse", "--path-format=absolute", "--git-path", "shallow")
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeGit, agenterr.LayerPipeline, false, "%s is a shallow clone whose history cut cannot be read", repo)
	}
	data, err := os.ReadFile(strings.TrimSpace(string(path)))
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeGit, agenterr.LayerPipeline, false, "%s is a shallow clone whose history cut cannot be read", repo)
	}
	for _, h := range strings.Fields(string(data)) {
		if !hashRe().MatchString(h) {
			continue
		}
		ct, err := runGit(ctx, repo, "show", "-s", "--format=%cI", h)
		if err != nil {
			continue // a boundary commit no longer reachable
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(ct)))
		if err != nil || !t.Before(w.Since) {
			e := agenterr.New(agenterr.CodeGit, agenterr.LayerPipeline, false,
				"%s is a shallow clone and the window %s reaches its history cut at commit %.12s: commits before it are missing and git counts that commit as adding the whole tree",
				repo, w, h)
			e.Hint = "fetch the full history with `git fetch --unshallow` (actions/checkout: `fetch-depth: 0`), or choose a later --since"
			return e
		}
	}
	return nil
}

// run runs git args in repo as capstan's own git (proc.Git): the git
// a PATH entry outside repo provides, with a minimal environment and no
// program the repository's configuration names (a gpg.program,
// core.fsmonitor or hook planted in its .git/config runs nowhere).
func runGit(ctx context.Context, repo string, args ...string) ([]byte, error) {
	g, err := proc.NewGit(os.Environ(), repo)
	if err != nil {
		return nil, err
	}
	return g.Output(ctx, repo, args...)
}

// withoutDir is args without its "-C DIR" (run names the directory).
func withoutDir(args []string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-C" {
			return append(append([]string{}, args[:i]...), args[i+2:]...)
		}
	}
	return args
}

// ParseLog parses the output of git log with LogFormat and --numstat.
func ParseLog(data []byte) ([]Commit, error) {
	var commits []Commit
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "\x00") {
			c, err := parseHeader(line[1:])
			if err != nil {
				return nil, err
			}
			commits = append(commits, c)
			continue
		}
		if line == "" {
			continue
		}
		if len(commits) == 0 {
			return nil, errors.New("git log output does not start with a commit header")
		}
		c := &commits[len(commits)-1]
		fc, err := parseNumstat(line)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c.Hash, err)
		}
		c.Files = append(c.Files, fc)
	}
	return commits, nil
}

func parseHeader(header string) (Commit, error) {
	f := strings.Split(header, "\x00")
	if len(f) != 6 {
		return Commit{}, fmt.Errorf("commit header has %d fields, want 6: %.80q", len(f), header)
	}
	c := Commit{Hash: f[0], Author: f[1], Email: f[2], Subject: f[5], Files: []FileChange{}}
	if !hashRe().MatchString(c.Hash) {
		return Commit{}, fmt.Errorf("bad commit hash %.80q", c.Hash)
	}
	var err error
	if c.AuthorTime, err = time.Parse(time.RFC3339, f[3]); err != nil {
		return Commit{}, fmt.Errorf("commit %s: author date: %w", c.Hash, err)
	}
	if c.CommitTime, err = time.Parse(time.RFC3339, f[4]); err != nil {
		return Commit{}, fmt.Errorf("commit %s: committer date: %w", c.Hash, err)
	}
	c.AuthorTime, c.CommitTime = c.AuthorTime.UTC(), c.CommitTime.UTC()
	c.Type, c.Conventional = CommitType(c.Subject)
	return c, nil
}

var hashRe = lazyre.New(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

func parseNumstat(line string) (FileChange, error) {
	parts := strings.SplitN(line, "\t", 3)
	if len(parts) != 3 || parts[2] == "" {
		return FileChange{}, fmt.Errorf("bad numstat line %.80q", line)
	}
	fc := FileChange{Path: parts[2]}
	if parts[0] == "-" && parts[1] == "-" {
		fc.Binary = true
	} else {
		a, err1 := strconv.Atoi(parts[0])
		d, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil || a < 0 || d < 0 {
			return FileChange{}, fmt.Errorf("bad numstat counts %.80q", line)
		}
		fc.Added, fc.Deleted = a, d
	}
	if strings.ContainsRune(parts[2], 0) {
		return FileChange{}, fmt.Errorf("NUL in numstat path")
	}
	if strings.HasPrefix(fc.Path, `"`) {
		p, err := strconv.Unquote(fc.Path)
		if err != nil {
			return FileChange{}, fmt.Errorf("bad quoted path %.80q", fc.Path)
		}
		fc.Path = p
	}
	return fc, nil
}

var conventionalRe = lazyre.New(`^([A-Za-z]+)(\([^)]*\))?!?: `)

var conventionalTypes = map[string]bool{
	"feat": true, "fix": true, "docs": true, "style": true, "refactor": true, "perf": true,
	"test": true, "build": true, "ci": true, "chore": true, "revert": true,
}

var heuristicWords = map[string]string{
	"fix": "fix", "fixes": "fix", "fixed": "fix", "bug": "fix", "bugfix": "fix", "hotfix": "fix",
	"correct": "fix", "repair": "fix", "resolve": "fix",
	"add": "feat", "adds": "feat", "added": "feat", "implement": "feat", "implements": "feat",
	"introduce": "feat", "create": "feat", "support": "feat", "enable": "feat", "feature": "feat", "new": "feat",
	"doc": "docs", "docs": "docs", "document": "docs", "readme": "docs",
	"test": "test", "tests": "test",
	"refactor": "refactor", "rename": "refactor", "move": "refactor", "clean": "refactor", "cleanup": "refactor",
	"simplify": "refactor", "extract": "refactor", "reorganize": "refactor", "remove": "refactor",
	"delete": "refactor", "drop": "refactor",
	"perf": "perf", "optimize": "perf", "speed": "perf",
	"bump": "chore", "upgrade": "chore", "release": "chore", "update": "chore", "chore": "chore",
	"ci": "chore", "build": "chore",
	"revert": "revert",
}

// CommitType classifies a subject line; conventional reports whether it
// came from a conventional-commit prefix rather than the heuristic.
func CommitType(subject string) (typ string, conventional bool) {
	s := strings.TrimSpace(subject)
	if m := conventionalRe().FindStringSubmatch(s); m != nil {
		t := strings.ToLower(m[1])
		if conventionalTypes[t] {
			return t, true
		}
	}
	// Drop an "area:" or "area/sub:" prefix.
	if i := strings.Index(s, ": "); i > 0 && !strings.ContainsAny(s[:i], " \t") {
		s = s[i+2:]
	}
	first := strings.ToLower(strings.Trim(strings.SplitN(s+" ", " ", 2)[0], ".,:;!()[]\"'`"))
	if t, ok := heuristicWords[first]; ok {
		return t, false
	}
	low := strings.ToLower(s)
	if strings.Contains(low, "fix") || strings.Contains(low, "bug") {
		return "fix", false
	}
	return "other", false
}
