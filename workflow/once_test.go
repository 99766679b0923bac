package workflow

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A change applied again — an activity retried after its worker died
// before or after the write — writes once: labels already as the change
// leaves them, a comment whose key marker is there, a closed issue.
func TestApplyOnceWritesOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"number": 7, "title": "t", "labels": ["kind:consider", "order:1"], "state": "open"}`
	if err := os.WriteFile(filepath.Join(dir, "7", "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	is := &Local{Dir: dir}
	key := Step{Issue: 7, Phase: "consider-pending", Cycle: 1, Name: "comment"}.Key("run1")
	changes := []Change{
		{Key: key + "a", Issue: 7, Kind: ChangeLabels, Add: []string{"kind:detail"}},
		{Key: key + "b", Issue: 7, Kind: ChangeLabels, Remove: []string{"kind:consider"}},
		{Key: key, Issue: 7, Kind: ChangeComment, Body: "## Spec\n\nbody"},
		{Key: key + "c", Issue: 7, Kind: ChangeClose},
	}
	for _, c := range changes {
		for attempt := 1; attempt <= 3; attempt++ {
			wrote, err := ApplyOnce(ctx, is, c)
			if err != nil || wrote != (attempt == 1) {
				t.Fatalf("%s attempt %d: wrote %v, %v", c.Kind, attempt, wrote, err)
			}
		}
	}
	labels, _ := is.Labels(ctx, 7)
	closed, _ := is.Closed(ctx, 7)
	comments, _ := is.RecentComments(ctx, 7, 10)
	if strings.Join(labels, ",") != "order:1,kind:detail" || !closed || len(comments) != 1 ||
		comments[0] != "## Spec\n\nbody\n\n<!-- capstan-step: run1/issue-7/consider-pending/cycle-1/comment -->" {
		t.Fatalf("labels %v closed %v comments %q", labels, closed, comments)
	}
	// The same comment under another key (another workflow run, cycle or
	// step) is posted.
	if wrote, err := ApplyOnce(ctx, is, Change{Key: "run2/issue-7/consider-pending/cycle-1/comment", Issue: 7, Kind: ChangeComment, Body: "## Spec\n\nbody"}); !wrote || err != nil {
		t.Fatalf("another key: wrote %v, %v", wrote, err)
	}
	// A body that quotes another step's marker (model text) does not
	// suppress that step's comment.
	next := "run1/issue-7/detail-pending/cycle-2/comment"
	if wrote, err := ApplyOnce(ctx, is, Change{Key: "run1/issue-7/x/cycle-1/comment", Issue: 7, Kind: ChangeComment, Body: "spec " + KeyMarker(next)}); !wrote || err != nil {
		t.Fatalf("quoting: wrote %v, %v", wrote, err)
	}
	if wrote, err := ApplyOnce(ctx, is, Change{Key: next, Issue: 7, Kind: ChangeComment, Body: "impl"}); !wrote || err != nil {
		t.Fatalf("a quoted marker suppressed its step's comment: wrote %v, %v", wrote, err)
	}
	if _, err := ApplyOnce(ctx, is, Change{Issue: 7, Kind: ChangeClose}); err == nil {
		t.Fatal("a change without a key was applied")
	}
	// A key cannot end the hidden HTML comment early.
	if m := KeyMarker("a-->b"); strings.Count(m, "-->") != 1 {
		t.Fatalf("marker %q", m)
	}
}
