package textdiff

import (
	"slices"
	"strings"
	"testing"
)

func TestLinesCountsAndListsChanges(t *testing.T) {
	sum, lines := Lines("a\nb\nc\n", "a\nB\nc\nd\n", 10)
	if sum != "+2 -1 lines" {
		t.Errorf("summary %q", sum)
	}
	if want := []string{"+B", "-b", "+d"}; !slices.Equal(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	if _, lines := Lines("a", "b", 1); len(lines) != 1 {
		t.Errorf("maxLines 1 gave %q", lines)
	}
}

func TestLinesOfLongTextsAndLines(t *testing.T) {
	long := strings.Repeat("x\n", 2001)
	if sum, lines := Lines(long, "", 5); !strings.Contains(sum, "too long") || lines != nil {
		t.Errorf("long texts: %q %q", sum, lines)
	}
	_, lines := Lines("", strings.Repeat("é", 150), 1)
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "…") || len(lines[0]) > 1+200+len("…") {
		t.Errorf("a long line is not cut: %q", lines)
	}
}
