package standard

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/testenv"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	good := map[string]time.Time{
		"7d":                   now.AddDate(0, 0, -7),
		"2w":                   now.AddDate(0, 0, -14),
		"36h":                  now.Add(-36 * time.Hour),
		"2026-11-01":           time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"2026-11-20T10:00:00Z": time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC),
		" 7d ":                 now.AddDate(0, 0, -7),
		"3m":                   time.Date(2026, 8, 21, 12, 0, 0, 0, time.UTC),
		"1y":                   time.Date(2025, 11, 21, 12, 0, 0, 0, time.UTC),
	}
	for in, want := range good {
		w, err := ParseSince(in, now)
		if err != nil || !w.Since.Equal(want) || !w.Until.Equal(now) {
			t.Errorf("%q: %v %v", in, w, err)
		}
	}
	for _, bad := range []string{"", "7", "d", "-7d", "0d", "2027-01-01", "yesterday", "99999d", "1900-01-01", "7d; rm -rf /", "--all"} {
		if _, err := ParseSince(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	w, _ := ParseSince("7d", now)
	if p := w.Previous(); !p.Until.Equal(w.Since) || !p.Since.Equal(now.AddDate(0, 0, -14)) {
		t.Errorf("previous = %v", p)
	}
}

func TestCommitType(t *testing.T) {
	cases := map[string][2]string{
		"feat(parser): add tokenizer":  {"feat", "true"},
		"fix!: breaking":               {"fix", "true"},
		"FEAT: shout":                  {"feat", "true"},
		"docs: describe usage":         {"docs", "true"},
		"parser: fix crash on unicode": {"fix", "false"},
		"Add CLI flags":                {"feat", "false"},
		"pipeline: contract checks":    {"other", "false"},
		"Refactor the loop":            {"refactor", "false"},
		"bump deps":                    {"chore", "false"},
		"weird: hotfix for bug":        {"fix", "false"},
		"":                             {"other", "false"},
		"Fixes #12":                    {"fix", "false"},
		"wip":                          {"other", "false"},
	}
	for subj, want := range cases {
		typ, conv := CommitType(subj)
		if typ != want[0] || strconv.FormatBool(conv) != want[1] {
			t.Errorf("%q = %s %v, want %v", subj, typ, conv, want)
		}
	}
}

func TestParseLog(t *testing.T) {
	h := strings.Repeat("a", 40)
	out := "\x00" + h + "\x00Ann\x1e\x1f\tTab\x00ann@x\x002026-11-20T10:00:00+02:00\x002026-11-20T10:00:00+02:00\x00fix: x\x1e\t|\n\n" +
		"3\t1\ta.go\n-\t-\tlogo.png\n1\t0\t\"d/caf\\303\\251 \\\"q\\\".md\"\n" +
		"\x00" + strings.Repeat("b", 40) + "\x00Bo\x00bo@x\x002026-11-19T10:00:00Z\x002026-11-19T10:00:00Z\x00empty\n"
	cs, err := ParseLog([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Added() != 4 || cs[0].Deleted() != 1 || !cs[0].Files[1].Binary ||
		cs[0].Files[2].Path != `d/café "q".md` || cs[0].CommitTime.Location() != time.UTC || cs[0].CommitTime.Hour() != 8 ||
		len(cs[1].Files) != 0 || cs[0].Type != "fix" || cs[0].Author != "Ann\x1e\x1f\tTab" || cs[0].Subject != "fix: x\x1e\t|" {
		t.Fatalf("%+v", cs)
	}
	for _, bad := range []string{
		"garbage",
		"\x00short",
		"\x00" + h + "\x00A\x00a\x00not-a-date\x002026-11-19T10:00:00Z\x00s\n",
		"\x00" + h + "\x00A\x00a\x002026-11-19T10:00:00Z\x002026-11-19T10:00:00Z\x00s\n\nx\ty\tz\n",
		"\x00" + h + "\x00A\x00a\x002026-11-19T10:00:00Z\x002026-11-19T10:00:00Z\x00s\n\n1\t2\t\n",
		"\x00" + h + "\x00A\x00a\x002026-11-19T10:00:00Z\x002026-11-19T10:00:00Z\x00s\n\n1\t2\t\"unterminated\n",
		"\x00ZZZZ\x00A\x00a\x002026-11-19T10:00:00Z\x002026-11-19T10:00:00Z\x00s\n",
		"\x00" + h + "\x00A\x00a\x002026-11-19T10:00:00Z\x002026-11-19T10:00:00Z\x00s\x00extra\n",
	} {
		if _, err := ParseLog([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseLog(f *testing.F) {
	h := strings.Repeat("c", 40)
	f.Add([]byte("\x00" + h + "\x00A\x00a@x\x002026-11-19T10:00:00Z\x002026-11-19T10:00:00Z\x00s\n\n1\t2\tp\n-\t-\tb\n"))
	f.Add([]byte(""))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\n\t\t\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseLog(data)
		if err != nil {
			return
		}
		for _, c := range cs {
			if len(c.Hash) < 40 || c.Type == "" {
				t.Fatalf("accepted commit %+v", c)
			}
			for _, fc := range c.Files {
				if fc.Path == "" || fc.Added < 0 || fc.Deleted < 0 {
					t.Fatalf("bad file %+v", fc)
				}
			}
		}
	})
}

func TestNumbers(t *testing.T) {
	got := Numbers("6 commits by 4 authors between 2026-11-14T12:00:00Z and 2026-11-21 12:00 UTC; 1,234 lines, 2.5 per day, see a1b2c3d and F12 (mail bob2@x.org)")
	var vals []string
	for _, n := range got {
		vals = append(vals, n.Text)
	}
	if strings.Join(vals, " ") != "6 4 1,234 2.5" {
		t.Fatalf("numbers = %v", vals)
	}
	if !Backed(got[2], []float64{1234}) || Backed(got[3], []float64{2.4, 3}) || !Backed(got[3], []float64{2.49}) {
		t.Fatal("Backed")
	}
}

// Digits inside names (an author bob42, a folder http3/, a version v1.2)
// are not numbers the text states; numbers next to them still are.
func TestNumbersIgnoreIdentifiers(t *testing.T) {
	got := Numbers("bob42 <bob42@example.com>: 3 commits; area http3/: 5 file changes; src/v2 and v1.2 and _x9, then (7) and 12%.")
	var vals []string
	for _, n := range got {
		vals = append(vals, n.Text)
	}
	if strings.Join(vals, " ") != "3 5 7 12" {
		t.Fatalf("numbers = %v", vals)
	}
}

func FuzzNumbers(f *testing.F) {
	f.Add("6 commits by 4 authors, 1,234 lines 2026-11-14")
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range Numbers(s) {
			if n.Value < 0 || !Backed(n, []float64{n.Value}) {
				t.Fatalf("%+v", n)
			}
		}
	})
}

// The facts of the fixture repository, checked against git's own counts.
func TestLogAndFactsAgainstGit(t *testing.T) {
	dir := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	now := testenv.GitHistoryNow()
	w, _ := ParseSince("7d", now)
	ctx := context.Background()
	cur, err := Log(ctx, dir, w)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := Log(ctx, dir, w.Previous())
	if err != nil {
		t.Fatal(err)
	}
	facts := Facts(cur, w, prev, w.Previous())
	byKind := map[string][]Fact{}
	for _, f := range facts {
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	since, until := "--since="+w.Since.Format(time.RFC3339), "--until="+w.Until.Format(time.RFC3339)
	count, _ := strconv.Atoi(git("rev-list", "--count", "--no-merges", since, until, "HEAD"))
	if count != 6 || byKind[KindCommits][0].Value != float64(count) || len(byKind[KindCommits][0].Commits) != count {
		t.Fatalf("commits: git %d, facts %+v", count, byKind[KindCommits])
	}
	authors := map[string]bool{}
	for _, l := range strings.Split(git("log", "--no-merges", "--format=%ae", since, until), "\n") {
		authors[l] = true
	}
	if byKind[KindAuthors][0].Value != float64(len(authors)) || len(authors) != 4 {
		t.Fatalf("authors: git %d, fact %v", len(authors), byKind[KindAuthors][0].Value)
	}
	// Lines and files from --shortstat-style totals computed independently.
	var add, del int
	files := map[string]bool{}
	for _, l := range strings.Split(git("-c", "core.quotePath=false", "log", "--no-merges", "--no-renames", "--numstat", "--format=", since, until), "\n") {
		if l == "" {
			continue
		}
		p := strings.SplitN(l, "\t", 3)
		a, _ := strconv.Atoi(p[0])
		d, _ := strconv.Atoi(p[1])
		add, del = add+a, del+d
		files[strings.Trim(p[2], `"`)] = true
	}
	if byKind[KindLinesAdded][0].Value != float64(add) || byKind[KindLinesDeleted][0].Value != float64(del) || byKind[KindFiles][0].Value != float64(len(files)) {
		t.Fatalf("lines/files: git +%d -%d %d files; facts %+v %+v %+v", add, del, len(files), byKind[KindLinesAdded], byKind[KindLinesDeleted], byKind[KindFiles])
	}
	pc, _ := strconv.Atoi(git("rev-list", "--count", "--no-merges", "--since="+w.Previous().Since.Format(time.RFC3339), "--until="+w.Previous().Until.Format(time.RFC3339), "HEAD"))
	if byKind[KindPreviousCommits][0].Value != float64(pc) || pc != 2 {
		t.Fatalf("previous: git %d, fact %v", pc, byKind[KindPreviousCommits][0])
	}
	// Every hash a fact cites is a commit of the window.
	in := map[string]bool{}
	for _, c := range cur {
		in[c.Hash] = true
	}
	for _, f := range facts {
		if f.Kind == KindPreviousCommits {
			continue
		}
		for _, h := range f.Commits {
			if !in[h] {
				t.Errorf("fact %s cites %s outside the window", f.ID, h)
			}
		}
	}
	types := map[string]float64{}
	for _, f := range byKind[KindTypeCommits] {
		types[strings.Fields(f.Content)[1]] = f.Value
	}
	if types["feat:"] != 2 || types["fix:"] != 2 || types["docs:"] != 1 || types["test:"] != 1 {
		t.Fatalf("types %v", types)
	}
}

func TestLogErrors(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	w, _ := ParseSince("7d", testenv.GitHistoryNow())
	_, err := Log(context.Background(), t.TempDir(), w)
	if !errors.Is(err, agenterr.ErrGit) || !strings.Contains(err.Error(), "not a git repository") {
		t.Fatalf("err = %v", err)
	}
	// Empty repository: no commits, no error.
	dir := testenv.MakeGitRepo(t, t.TempDir(), nil)
	cs, err := Log(context.Background(), dir, w)
	if err != nil || len(cs) != 0 {
		t.Fatalf("empty repo: %v %v", cs, err)
	}
	// A repo path that looks like an option is still a path.
	if _, err := Log(context.Background(), "--output=/tmp/x", w); err == nil {
		t.Fatal("option-like repo accepted")
	}
}

// Hostile names, subjects and paths from a real repository parse exactly.
func TestLogHostileContent(t *testing.T) {
	when := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	steps := []testenv.GitStep{{When: when, Author: "Eve \x1f|Tab <eve@example.com>", Message: "feat: \x1e sep\tand tab --format=%H $(rm -rf /)",
		Files: map[string]string{"we\"ird\nname.txt": "a\n", "-rf": "b\nc\n", "dir/émoji 🎉.md": "d\n"}}}
	dir := testenv.MakeGitRepo(t, t.TempDir(), steps)
	w, _ := ParseSince("7d", testenv.GitHistoryNow())
	cs, err := Log(context.Background(), dir, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 {
		t.Fatalf("%d commits", len(cs))
	}
	c := cs[0]
	paths := map[string]int{}
	for _, f := range c.Files {
		paths[f.Path] = f.Added
	}
	if c.Author != "Eve \x1f|Tab" || c.Subject != "feat: \x1e sep\tand tab --format=%H $(rm -rf /)" || c.Type != "feat" ||
		paths["we\"ird\nname.txt"] != 1 || paths["-rf"] != 2 || paths["dir/émoji 🎉.md"] != 1 || c.Added() != 4 {
		t.Fatalf("%+v", c)
	}
}

func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"7d", "2w", "36h", "2026-11-01", "2026-11-20T10:00:00Z", "9999d", "x"} {
		f.Add(s)
	}
	now := testenv.GitHistoryNow()
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseSince(s, now)
		if err != nil {
			return
		}
		if !w.Since.Before(w.Until) || !w.Until.Equal(now) || now.Sub(w.Since) > 20*365*24*time.Hour {
			t.Fatalf("%q -> %v", s, w)
		}
	})
}

// .mailmap maps two identities of one person to one author.
func TestLogHonoursMailmap(t *testing.T) {
	d := func(day int) time.Time { return time.Date(2026, 11, day, 10, 0, 0, 0, time.UTC) }
	dir := testenv.MakeGitRepo(t, t.TempDir(), []testenv.GitStep{
		{When: d(1), Author: "A <a@example.com>", Message: "init", Files: map[string]string{".mailmap": "Bob Marley <bob@example.com> <bob@old.example.com>\n"}},
		{When: d(18), Author: "Bob Marley <bob@example.com>", Message: "one", Files: map[string]string{"a": "1\n"}},
		{When: d(19), Author: "bobby <bob@old.example.com>", Message: "two", Files: map[string]string{"a": "2\n"}},
	})
	w, _ := ParseSince("7d", testenv.GitHistoryNow())
	cur, err := Log(context.Background(), dir, w)
	if err != nil {
		t.Fatal(err)
	}
	facts := Facts(cur, w, nil, w.Previous())
	for _, f := range facts {
		if f.Kind == KindAuthors && f.Value != 1 {
			t.Fatalf("authors = %v, want 1 (mailmap)", f.Value)
		}
		if f.Kind == KindAuthorCommits && f.Content != "Bob Marley <bob@example.com>: 2 commits" {
			t.Fatalf("author fact %q", f.Content)
		}
	}
}

// A shallow clone whose history cut lies inside the window is refused; a
// window after the cut is counted.
func TestLogShallowClone(t *testing.T) {
	d := func(day int) time.Time { return time.Date(2026, 11, day, 10, 0, 0, 0, time.UTC) }
	src := testenv.MakeGitRepo(t, t.TempDir(), []testenv.GitStep{
		{When: d(1), Author: "A <a@example.com>", Message: "big tree", Files: map[string]string{"big": strings.Repeat("x\n", 500)}},
		{When: d(10), Author: "A <a@example.com>", Message: "two", Files: map[string]string{"a": "1\n"}},
		{When: d(19), Author: "A <a@example.com>", Message: "three", Files: map[string]string{"a": "2\n"}},
	})
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", "--depth=2", "file://"+src, clone).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	now := testenv.GitHistoryNow()
	w, _ := ParseSince("14d", now) // reaches the cut at day 10
	_, err := Log(context.Background(), clone, w)
	if !errors.Is(err, agenterr.ErrGit) || !strings.Contains(err.Error(), "shallow clone") || !strings.Contains(err.Error(), "git fetch --unshallow") {
		t.Fatalf("err = %v", err)
	}
	w, _ = ParseSince("7d", now) // after the cut
	cs, err := Log(context.Background(), clone, w)
	if err != nil || len(cs) != 1 || cs[0].Added() != 1 {
		t.Fatalf("commits %+v, err %v", cs, err)
	}
}
