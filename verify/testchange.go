// A legitimate test change: the model may ask for a protected file (a
// test it believes contradicts the task's specification) to change, with a
// line of its answer
//
//	REQUEST_TEST_CHANGE: calc_test.go Add(2, 3) is specified to be 5, the test expects 6
//
// after it has made the change in the work dir. The request covers exactly
// the files it names: their change against the baseline (the diff the
// decider sees) is recorded, and only that content becomes the new
// baseline when the request is approved (FilesBaseline.Accept). Any other
// protected file that changed stays a protected-files failure.

package verify

import (
	"github.com/capstan-dev/capstan/event"
	"path/filepath"
	"slices"
	"strings"
)

// TestChangeMarker starts the line with which the model asks to change a
// protected file: the file's path (relative to the work dir) and the
// reason follow on the same line. One line per file.
const TestChangeMarker = "REQUEST_TEST_CHANGE:"

// Decisions of a TestChangeDecision.
const (
	TestChangeApproved = "approved"
	TestChangeRejected = "rejected"
)

// AcceptChanges makes the requested files' new states the baseline b's,
// for the files its globs cover; other files are left as they are.
func AcceptChanges(b *event.ProtectBaseline, files []event.RequestedFile) {
	if b == nil {
		return
	}
	m, err := NewGlobMatcher(b.Globs)
	if err != nil {
		return
	}
	for _, f := range files {
		if !m.Match(f.Path) {
			continue
		}
		if f.Kind == Deleted {
			delete(b.Files, f.Path)
			continue
		}
		if b.Files == nil {
			b.Files = map[string]event.ProtectedFile{}
		}
		b.Files[f.Path] = f.File
	}
}

// Request builds the request for the files paths (relative to the work
// dir): each must be protected and changed against the baseline. It
// returns the paths that are not (with why), which make the request
// invalid.
func (g *ProtectedFilesGuard) Request(iteration int, paths []string, reason string) (*event.TestChangeRequest, []string, error) {
	req := &event.TestChangeRequest{Iteration: iteration, Reason: reason}
	var invalid []string
	named := map[string]bool{}
	for _, p := range paths {
		rel := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "./")
		if named[rel] {
			continue
		}
		named[rel] = true
		f, ok, protected, err := g.requested(rel)
		switch {
		case err != nil:
			return nil, nil, err
		case !protected:
			invalid = append(invalid, rel+" is not a protected file (you may change it without asking)")
		case !ok:
			invalid = append(invalid, rel+" is unchanged: make the change in the work dir first, then ask for it")
		default:
			req.Files = append(req.Files, f)
		}
	}
	for _, b := range []*event.ProtectBaseline{g.Baseline, g.Step} {
		if b == nil {
			continue
		}
		ch, err := CheckProtected(b, g.Dir)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range ch {
			if !named[c.Path] && !slices.Contains(req.Unrequested, c.String()) {
				req.Unrequested = append(req.Unrequested, c.String())
			}
		}
	}
	slices.Sort(req.Unrequested)
	return req, invalid, nil
}

// requested is the change of one file against the first baseline that
// protects it: ok is false when it is unchanged, protected false when no
// baseline's globs cover it.
func (g *ProtectedFilesGuard) requested(rel string) (event.RequestedFile, bool, bool, error) {
	for _, b := range []*event.ProtectBaseline{g.Baseline, g.Step} {
		if b == nil {
			continue
		}
		m, err := NewGlobMatcher(b.Globs)
		if err != nil {
			return event.RequestedFile{}, false, false, err
		}
		if !m.Match(rel) {
			continue
		}
		all, err := scan(g.Dir, m)
		if err != nil {
			return event.RequestedFile{}, false, true, err
		}
		var now *entry
		if e, ok := all[rel]; ok {
			now = &e
		}
		old, had := b.Files[rel]
		f := event.RequestedFile{FileChange: event.FileChange{Path: rel}}
		switch {
		case now == nil && !had:
			return f, false, true, nil
		case now == nil:
			f.Kind = Deleted
			if old.HasContent {
				f.Diff = lineDiff(old.Content, "")
			}
		case !had:
			f.Kind = Added
			if now.text() {
				f.Diff = lineDiff("", string(now.data))
			}
		case now.digest == old.Digest:
			return f, false, true, nil
		default:
			f.Kind = Modified
			if old.HasContent && now.text() {
				f.Diff = lineDiff(old.Content, string(now.data))
			}
		}
		if now != nil {
			f.File = event.ProtectedFile{Digest: now.digest}
			if now.text() {
				f.File.Content, f.File.HasContent = string(now.data), true
			}
		}
		return f, true, true, nil
	}
	return event.RequestedFile{}, false, false, nil
}
