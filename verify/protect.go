// Protected files — tests, their configuration, the module file — are
// files the model may read but not change: they must stay as they were
// when the run started.
//
// TakeFilesBaseline records a FilesBaseline of every file of a work dir
// that matches the protect globs: its SHA-256 digest and, for a text file of at most
// MaxContentBytes, its content (for the diff a retry prompt shows). The run
// journals the baseline once, at its start; a resumed run reuses the
// journaled one. Check compares the work dir with the baseline: a protected
// file that was changed, deleted or added is a FileChange, whatever tool made
// it (Write, Edit, Bash, an MCP server).

package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/textdiff"
	"github.com/capstan-dev/capstan/journal"
)

// Bounds of a baseline. A baseline holds file contents in memory and in the
// journal; beyond these bounds it keeps digests only (changes are still
// detected, the diff is not shown).
const (
	// MaxContentBytes is the largest file whose content is kept.
	MaxContentBytes = 64 << 10
	// MaxTotalContentBytes bounds the kept contents of one baseline.
	MaxTotalContentBytes = 4 << 20
	// MaxFiles bounds the protected files of one baseline; a work dir with
	// more is refused (the globs are too broad).
	MaxFiles = 10000
)

// Matcher tells whether a work-dir-relative path is protected.
type GlobMatcher struct {
	globs []string
}

// NewMatcher returns a Matcher for globs (doublestar syntax). An invalid
// glob is a CONFIG_INVALID error.
func NewGlobMatcher(globs []string) (*GlobMatcher, error) {
	for _, g := range globs {
		if !doublestar.ValidatePattern(g) {
			return nil, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"runner.verification.protect: %q is not a valid glob", g)
		}
	}
	return &GlobMatcher{globs: slices.Clone(globs)}, nil
}

// Globs returns the matcher's globs.
func (m *GlobMatcher) Globs() []string { return slices.Clone(m.globs) }

// Match reports whether rel (relative to the work dir, either separator)
// is protected.
func (m *GlobMatcher) Match(rel string) bool {
	if m == nil {
		return false
	}
	p := filepath.ToSlash(filepath.Clean(rel))
	p = strings.TrimPrefix(p, "./")
	for _, g := range m.globs {
		if ok, _ := doublestar.Match(g, p); ok {
			return true
		}
	}
	return false
}

// journalRoot holds capstan's run journals; it is never protected.
var journalRoot = path.Dir(journal.RunsDir)

// Take records the protected files under dir. The .git directories and the
// run journals (.capstan) are not walked; symbolic links are recorded by their target path text, not
// followed.
func TakeFilesBaseline(dir string, m *GlobMatcher) (*event.ProtectBaseline, error) {
	files, err := scan(dir, m)
	if err != nil {
		return nil, err
	}
	b := &event.ProtectBaseline{Globs: m.Globs(), Files: make(map[string]event.ProtectedFile, len(files))}
	total := 0
	for p, e := range files {
		f := event.ProtectedFile{Digest: e.digest}
		if e.text() && !inInstalledPackage(p) && total+len(e.data) <= MaxTotalContentBytes {
			f.Content, f.HasContent = string(e.data), true
			total += len(e.data)
		}
		b.Files[p] = f
	}
	return b, nil
}

// inInstalledPackage reports whether the work-dir-relative path p is a
// file of a package installed in a node_modules folder (its .bin folder
// excepted). The baseline keeps only its digest: the test runners'
// packages are protected, and their sources would fill the content budget
// of every baseline (3 MB of a 3.6 MB journal for jest) for a diff no
// retry prompt needs; a change to one is named without it.
func inInstalledPackage(p string) bool {
	segs := strings.Split(p, "/")
	for i, s := range segs[:len(segs)-1] {
		if s == "node_modules" {
			return i+1 >= len(segs)-1 || segs[i+1] != ".bin"
		}
	}
	return false
}

// Kinds of Change.
const (
	Modified = "modified"
	Deleted  = "deleted"
	Added    = "added"
)

// CheckProtected compares the protected files under dir with the
// baseline b and returns the changes, sorted by path.
func CheckProtected(b *event.ProtectBaseline, dir string) ([]event.FileChange, error) {
	m, err := NewGlobMatcher(b.Globs)
	if err != nil {
		return nil, err
	}
	now, err := scan(dir, m)
	if err != nil {
		return nil, err
	}
	var out []event.FileChange
	for p, f := range b.Files {
		e, ok := now[p]
		switch {
		case !ok:
			c := event.FileChange{Path: p, Kind: Deleted}
			if f.HasContent {
				c.Diff = lineDiff(f.Content, "")
			}
			out = append(out, c)
		case e.digest != f.Digest:
			c := event.FileChange{Path: p, Kind: Modified}
			if f.HasContent && e.text() {
				c.Diff = lineDiff(f.Content, string(e.data))
			}
			out = append(out, c)
		}
	}
	for p, e := range now {
		if _, ok := b.Files[p]; !ok {
			c := event.FileChange{Path: p, Kind: Added}
			if e.text() {
				c.Diff = lineDiff("", string(e.data))
			}
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y event.FileChange) int { return strings.Compare(x.Path, y.Path) })
	return out, nil
}

// entry is one protected file as scan found it: its digest and, when it
// has at most MaxContentBytes, its bytes (a larger file is hashed as a
// stream, never held in memory).
type entry struct {
	digest string
	data   []byte // nil when larger than MaxContentBytes
}

// text reports whether the file's content can be kept and diffed.
func (e entry) text() bool { return e.data != nil && utf8.Valid(e.data) }

// unreadableBelow is what a walk of dir does with err at p: an entry
// below dir that cannot be read is passed over (nil), any other error
// ends the walk.
func unreadableBelow(dir, p string, err error) error {
	if errors.Is(err, fs.ErrPermission) && p != dir {
		return nil
	}
	return err
}

// scan reads every protected file under dir.
func scan(dir string, m *GlobMatcher) (map[string]entry, error) {
	out := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return unreadableBelow(dir, p, err)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if (d.Name() == ".git" && p != dir) || filepath.ToSlash(rel) == journalRoot {
				return filepath.SkipDir
			}
			return nil
		}
		if !m.Match(rel) {
			return nil
		}
		if len(out) >= MaxFiles {
			return agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"runner.verification.protect matches more than %d files; narrow the globs", MaxFiles)
		}
		var e entry
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e = newEntry([]byte("symlink -> " + target))
		case d.Type().IsRegular():
			if e, err = readEntry(p); err != nil {
				return err
			}
		default:
			e = newEntry([]byte("special file " + d.Type().String()))
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("protected files of %s: %w", dir, err)
	}
	return out, nil
}

func newEntry(data []byte) entry {
	sum := sha256.Sum256(data)
	return entry{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

// readEntry reads a regular file: whole when small, hashed as a stream
// otherwise (a huge file cannot exhaust memory).
func readEntry(p string) (entry, error) {
	f, err := os.Open(p)
	if err != nil {
		return entry{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return entry{}, err
	}
	// One byte more than the size (at most MaxContentBytes) tells a file
	// that is larger, or grew since Stat, from one that fits.
	buf := make([]byte, min(st.Size(), MaxContentBytes)+1)
	n, err := io.ReadFull(f, buf)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return newEntry(buf[:n]), nil
	case err != nil:
		return entry{}, err
	}
	h := sha256.New()
	h.Write(buf)
	if _, err := io.Copy(h, f); err != nil {
		return entry{}, err
	}
	return entry{digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}, nil
}

// maxDiffLines bounds the changed lines a Change's diff shows.
const maxDiffLines = 60

// lineDiff is the changed lines of before → after ("-" removed, "+"
// added), with a summary line first.
func lineDiff(before, after string) string {
	sum, lines := textdiff.Lines(before, after, maxDiffLines)
	var b strings.Builder
	b.WriteString(sum)
	for _, l := range lines {
		b.WriteString("\n")
		b.WriteString(l)
	}
	return b.String()
}
