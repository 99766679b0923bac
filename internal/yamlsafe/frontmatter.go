// SplitFrontmatter splits a leading YAML frontmatter block from the
// text after it: the one splitter of prompt files, retry prompts and
// SKILL.md files.
//
// The rule: a leading UTF-8 byte order mark is ignored. Frontmatter is
// present when the first line is a fence: "---", optionally followed by
// spaces or tabs, ended by "\n" or "\r\n". It ends at the next fence line,
// which may also be the last line of the text without a line ending. The
// YAML is the text between the two fences; the body is the text after the
// closing fence's line ending, unchanged (its line endings are kept). An
// opening fence with no closing fence is ErrUnclosedFrontmatter; what it means is the
// caller's to say: prompt files and SKILL.md refuse it (sending YAML to a
// model hides the mistake), a retry prompt takes the whole text as its
// body (its first line may be a Markdown rule).

package yamlsafe

import (
	"errors"
	"strings"
)

// ErrUnclosedFrontmatter is returned by SplitFrontmatter when the text opens a frontmatter block
// that no fence line closes.
var ErrUnclosedFrontmatter = errors.New(`frontmatter opened by a "---" line is not closed by a "---" line`)

// Frontmatter is a text split by SplitFrontmatter.
type Frontmatter struct {
	// Present is whether the text starts with frontmatter.
	Present bool
	// YAML is the frontmatter between the fences ("" when absent).
	YAML string
	// Body is the text after the frontmatter (the whole text, without its
	// byte order mark, when there is none).
	Body string
	// BodyLine is the 1-based line of the text on which Body starts (1
	// when there is no frontmatter). The YAML starts on line 2.
	BodyLine int
}

// SplitFrontmatter separates src into its frontmatter and body by the rule
// above.
func SplitFrontmatter(src string) (Frontmatter, error) {
	s := strings.TrimPrefix(src, "\ufeff")
	first, i, ended := frontmatterLine(s, 0)
	if !frontmatterFence(first) || !ended {
		return Frontmatter{Body: s, BodyLine: 1}, nil
	}
	start, n := i, 2
	for i < len(s) {
		l, next, _ := frontmatterLine(s, i)
		if frontmatterFence(l) {
			return Frontmatter{Present: true, YAML: s[start:i], Body: s[next:], BodyLine: n + 1}, nil
		}
		i, n = next, n+1
	}
	return Frontmatter{}, ErrUnclosedFrontmatter
}

// line returns the line of s that starts at i without its line ending,
// the index after it, and whether a "\n" ended it.
func frontmatterLine(s string, i int) (string, int, bool) {
	j := strings.IndexByte(s[i:], '\n')
	if j < 0 {
		return s[i:], len(s), false
	}
	return strings.TrimSuffix(s[i:i+j], "\r"), i + j + 1, true
}

// fence reports whether l is a fence line: "---" and trailing blanks.
func frontmatterFence(l string) bool { return strings.TrimRight(l, " \t") == "---" }
