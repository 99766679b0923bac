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
	"time"
)

// TestChangeMarker starts the line with which the model asks to change a
// protected file: the file's path (relative to the work dir) and the
// reason follow on the same line. One line per file.
const TestChangeMarker = "REQUEST_TEST_CHANGE:"

// EventKind implements event.Payload: a request is journaled by the run,
// as a testchange.requested event, when the model asks to change
// protected files.
func (*TestChangeRequest) EventKind() event.Kind { return event.KindTestChangeRequested }

// EventKind implements event.Payload: a decision is journaled, as a
// testchange.decided event, by whoever decided: capstan approve / capstan
// reject outside the run, or the run itself under the hiddenTests policy.
func (*TestChangeDecision) EventKind() event.Kind { return event.KindTestChangeDecided }

// Decisions of a TestChangeDecision.
const (
	TestChangeApproved = "approved"
	TestChangeRejected = "rejected"
)

// RequestedFile is one protected file a request asks to change: its change
// against the baseline, and the content that becomes its baseline when the
// request is approved.
type RequestedFile struct {
	FileChange
	// File is the new state: its digest and (when small text) content.
	// Zero for a deleted file.
	File ProtectedFile `json:"file,omitzero"`
}

// TestChangeRequest is the payload of testchange.requested.
type TestChangeRequest struct {
	// Iteration is the iteration the request was made in.
	Iteration int `json:"iteration"`
	// Reason is the model's reason for each file, joined ("; ").
	Reason string `json:"reason"`
	// Files are the files the request names, with their diffs.
	Files []RequestedFile `json:"files"`
	// Unrequested are other protected files that differ from the baseline
	// ("modified: x"): not part of the request, never approved by it.
	Unrequested []string `json:"unrequested,omitempty"`
}

// Paths are the requested files' paths.
func (r *TestChangeRequest) Paths() []string {
	out := make([]string, len(r.Files))
	for i, f := range r.Files {
		out[i] = f.Path
	}
	return out
}

// Diff is the requested changes as one text, file by file.
func (r *TestChangeRequest) Diff() string {
	var b strings.Builder
	for _, f := range r.Files {
		b.WriteString("--- " + f.Path + " (" + f.Kind + ")\n")
		if f.Diff != "" {
			b.WriteString(f.Diff + "\n")
		} else {
			b.WriteString("(binary or too large to show)\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// TestChangeDecision is the payload of testchange.decided.
type TestChangeDecision struct {
	// Iteration is the request's iteration.
	Iteration int `json:"iteration"`
	// Decision is TestChangeApproved or TestChangeRejected.
	Decision string `json:"decision"`
	// By says who decided: a user name for capstan approve/reject,
	// "hidden tests" for the hiddenTests policy.
	By string `json:"by"`
	// At is when a human decided (zero for the hidden tests' decision,
	// made during the run; the journal event has the time).
	At time.Time `json:"at,omitzero"`
	// Reason is why (a rejection's --reason, the hidden tests' verdict).
	Reason string `json:"reason,omitempty"`
	// Files are the files decided on (the request's, with their diffs).
	Files []RequestedFile `json:"files"`
}

// Accept makes the requested files' new states the baseline's, for the
// files its globs cover; other files are left as they are.
func (b *FilesBaseline) Accept(files []RequestedFile) {
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
			b.Files = map[string]ProtectedFile{}
		}
		b.Files[f.Path] = f.File
	}
}

// Request builds the request for the files paths (relative to the work
// dir): each must be protected and changed against the baseline. It
// returns the paths that are not (with why), which make the request
// invalid.
func (g *ProtectedFilesGuard) Request(iteration int, paths []string, reason string) (*TestChangeRequest, []string, error) {
	req := &TestChangeRequest{Iteration: iteration, Reason: reason}
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
	for _, b := range []*FilesBaseline{g.Baseline, g.Step} {
		if b == nil {
			continue
		}
		ch, err := b.Check(g.Dir)
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
func (g *ProtectedFilesGuard) requested(rel string) (RequestedFile, bool, bool, error) {
	for _, b := range []*FilesBaseline{g.Baseline, g.Step} {
		if b == nil {
			continue
		}
		m, err := NewGlobMatcher(b.Globs)
		if err != nil {
			return RequestedFile{}, false, false, err
		}
		if !m.Match(rel) {
			continue
		}
		all, err := scan(g.Dir, m)
		if err != nil {
			return RequestedFile{}, false, true, err
		}
		var now *entry
		if e, ok := all[rel]; ok {
			now = &e
		}
		old, had := b.Files[rel]
		f := RequestedFile{FileChange: FileChange{Path: rel}}
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
			f.File = ProtectedFile{Digest: now.digest}
			if now.text() {
				f.File.Content, f.File.HasContent = string(now.data), true
			}
		}
		return f, true, true, nil
	}
	return RequestedFile{}, false, false, nil
}
