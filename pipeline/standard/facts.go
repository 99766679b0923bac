package standard

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/internal/lazyre"
)

// Fact is one number about the history, with the commits that back it.
type Fact struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"`
	Content string   `json:"content"`
	Value   float64  `json:"value"`
	Source  string   `json:"source"`
	Commits []string `json:"commits"`
	// Window is the time range counted, on the commits and
	// previous_commits facts.
	Window *Window `json:"window,omitempty"`
}

// Fact kinds.
const (
	KindCommits         = "commits"
	KindAuthors         = "authors"
	KindFiles           = "files_changed"
	KindLinesAdded      = "lines_added"
	KindLinesDeleted    = "lines_deleted"
	KindAuthorCommits   = "author_commits"
	KindTypeCommits     = "type_commits"
	KindAreaChanges     = "area_changes"
	KindPreviousCommits = "previous_commits"
)

// MaxAreas bounds the area facts (top-level directories by file changes).
const MaxAreas = 3

// Facts derives the facts of cur (commits in w) and prev (commits in the
// previous window pw). IDs are F1, F2, ... in a fixed order: commits,
// authors, files changed, lines added, lines deleted, commits per author
// (most first), commits per type (most first), top areas, previous-window
// commits. Every fact lists the hashes of the commits it counts.
func Facts(cur []Commit, w Window, prev []Commit, pw Window) []Fact {
	var facts []Fact
	add := func(kind, content string, v int, hashes []string) {
		if hashes == nil {
			hashes = []string{}
		}
		facts = append(facts, Fact{ID: "F" + strconv.Itoa(len(facts)+1), Kind: kind, Content: content,
			Value: float64(v), Source: "git", Commits: hashes})
	}
	all := hashes(cur)
	span := w.Since.UTC().Format("2006-01-02 15:04") + " to " + w.Until.UTC().Format("2006-01-02 15:04") + " UTC"
	add(KindCommits, fmt.Sprintf("%s (no merges) from %s", Plural(len(cur), "commit"), span), len(cur), all)
	facts[0].Window = &w

	authors := groupCommits(cur, func(c Commit) (string, string) {
		return strings.ToLower(c.Email), c.Author + " <" + c.Email + ">"
	})
	add(KindAuthors, Plural(len(authors), "author"), len(authors), all)

	files := map[string]bool{}
	var touching []string
	added, deleted := 0, 0
	var addHashes, delHashes []string
	for _, c := range cur {
		if len(c.Files) > 0 {
			touching = append(touching, c.Hash)
		}
		for _, f := range c.Files {
			files[f.Path] = true
		}
		if c.Added() > 0 {
			addHashes = append(addHashes, c.Hash)
		}
		if c.Deleted() > 0 {
			delHashes = append(delHashes, c.Hash)
		}
		added += c.Added()
		deleted += c.Deleted()
	}
	add(KindFiles, Plural(len(files), "distinct file")+" changed", len(files), touching)
	add(KindLinesAdded, Plural(added, "line")+" added", added, addHashes)
	add(KindLinesDeleted, Plural(deleted, "line")+" deleted", deleted, delHashes)
	for _, g := range authors {
		add(KindAuthorCommits, g.name+": "+Plural(len(g.commits), "commit"), len(g.commits), g.commits)
	}
	for _, g := range groupCommits(cur, func(c Commit) (string, string) { return c.Type, c.Type }) {
		add(KindTypeCommits, "type "+g.name+": "+Plural(len(g.commits), "commit"), len(g.commits), g.commits)
	}
	for _, a := range areas(cur) {
		add(KindAreaChanges, "area "+a.name+": "+Plural(a.changes, "file change"), a.changes, a.commits)
	}
	pspan := pw.Since.UTC().Format("2006-01-02 15:04") + " to " + pw.Until.UTC().Format("2006-01-02 15:04") + " UTC"
	add(KindPreviousCommits, Plural(len(prev), "commit")+" (no merges) in the previous window, "+pspan, len(prev), hashes(prev))
	facts[len(facts)-1].Window = &pw
	return facts
}

// commitGroup is the commits that share a key (an author, a type).
type commitGroup struct {
	name    string
	commits []string
}

// groupCommits groups cur by key (which gives a group's key and name), the
// largest group first, then by name.
func groupCommits(cur []Commit, key func(Commit) (string, string)) []commitGroup {
	idx := map[string]int{}
	var gs []commitGroup
	for _, c := range cur {
		k, name := key(c)
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, commitGroup{name: name})
		}
		gs[i].commits = append(gs[i].commits, c.Hash)
	}
	sort.SliceStable(gs, func(a, b int) bool {
		if len(gs[a].commits) != len(gs[b].commits) {
			return len(gs[a].commits) > len(gs[b].commits)
		}
		return gs[a].name < gs[b].name
	})
	return gs
}

// Plural renders "1 commit" or "2 commits".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

type area struct {
	name    string
	changes int
	commits []string
}

// areas ranks top-level directories (root files count as "(root)") by
// file changes.
func areas(cur []Commit) []area {
	idx := map[string]*area{}
	for _, c := range cur {
		seen := map[string]bool{}
		for _, f := range c.Files {
			name := "(root)"
			if i := strings.Index(f.Path, "/"); i > 0 {
				name = f.Path[:i+1]
			}
			a := idx[name]
			if a == nil {
				a = &area{name: name}
				idx[name] = a
			}
			a.changes++
			if !seen[name] {
				seen[name] = true
				a.commits = append(a.commits, c.Hash)
			}
		}
	}
	var list []area
	for _, a := range idx {
		list = append(list, *a)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].changes != list[j].changes {
			return list[i].changes > list[j].changes
		}
		return list[i].name < list[j].name
	})
	if len(list) > MaxAreas {
		list = list[:MaxAreas]
	}
	return list
}

func hashes(cs []Commit) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Hash
	}
	return out
}

// Number is a number found in prose.
type Number struct {
	Text     string  `json:"text"`
	Value    float64 `json:"value"`
	Decimals int     `json:"decimals"`
}

var (
	// Stripped before numbers are read: dates and times, hex commit hashes
	// (with at least one letter), fact ids (F12), and email addresses.
	ignoreRe = lazyre.New(`\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?|\b\d{2}:\d{2}(?::\d{2})?\b|\b[0-9a-f]*[a-f][0-9a-f]*\b|\bF\d+\b|\S+@\S+`)
	numberRe = lazyre.New(`\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?`)
)

// Numbers lists the numbers stated in text, ignoring dates, times, commit
// hashes, fact ids (F3), email addresses and identifiers: a word that
// starts with a letter or underscore (bob42, http3, v1.2) or contains a
// slash (src/v2, http3/) names something, it does not state a number.
func Numbers(text string) []Number {
	blank := func(s string) string { return strings.Repeat(" ", len(s)) }
	clean := ignoreRe().ReplaceAllStringFunc(text, blank)
	clean = nonSpaceRe().ReplaceAllStringFunc(clean, func(w string) string {
		if isIdentifier(strings.Trim(w, identifierTrim)) {
			return blank(w)
		}
		return w
	})
	var out []Number
	for _, m := range numberRe().FindAllString(clean, -1) {
		plain := strings.ReplaceAll(m, ",", "")
		v, err := strconv.ParseFloat(plain, 64)
		if err != nil {
			continue
		}
		dec := 0
		if i := strings.IndexByte(plain, '.'); i >= 0 {
			dec = len(plain) - i - 1
		}
		out = append(out, Number{Text: m, Value: v, Decimals: dec})
	}
	return out
}

// nonSpaceRe splits text into whitespace-separated words.
var nonSpaceRe = lazyre.New(`\S+`)

// identifierTrim is the punctuation around a word that is not part of it.
const identifierTrim = ".,;:!?()[]{}<>\"'`*"

// isIdentifier reports whether a word with digits names something (a
// user, a folder, a version) rather than stating a number.
func isIdentifier(w string) bool {
	if !strings.ContainsAny(w, "0123456789") {
		return false
	}
	if strings.Contains(w, "/") && strings.IndexFunc(w, unicode.IsLetter) >= 0 {
		return true
	}
	r, _ := utf8.DecodeRuneInString(w)
	return r == '_' || unicode.IsLetter(r)
}

// Backed reports whether n equals one of values at n's precision.
func Backed(n Number, values []float64) bool {
	scale := math.Pow(10, float64(n.Decimals))
	for _, v := range values {
		if math.Round(v*scale) == math.Round(n.Value*scale) {
			return true
		}
	}
	return false
}
