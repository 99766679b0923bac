// CodeBlocks finds the fenced code blocks of a Markdown text, the
// way models write them in their answers: a run of three or more ` or ~
// (indented or not) opens a block, an info string may follow it ("json",
// "done"), and a line holding only a run of the same character at least as
// long closes it.

package schema

import "strings"

// CodeBlock is one fenced code block.
type CodeBlock struct {
	// Fence is the run of ` or ~ that opens the block ("```", "~~~~").
	Fence string
	// Info is the info string after the opening fence, trimmed and as
	// written (case kept): "json", "facilitator_decision", "".
	Info string
	// Body is the text between the fences as written, each line with its
	// line end.
	Body string
	// Closed reports whether a closing fence ends the block; an unclosed
	// block runs to the end of the text.
	Closed bool
}

// CodeBlocks returns the fenced code blocks of text in order. A line opening
// with backticks whose info string holds a backtick is inline code
// (```a``` on one line), not a fence. Blocks do not nest: a fence line
// inside a block either closes it or is part of its body.
func CodeBlocks(text string) []CodeBlock {
	var out []CodeBlock
	lines := strings.SplitAfter(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimLeft(lines[i], " \t")
		fence := codeFenceOf(l)
		if fence == "" {
			continue
		}
		info := strings.TrimSpace(l[len(fence):])
		if fence[0] == '`' && strings.Contains(info, "`") {
			continue
		}
		b := CodeBlock{Fence: fence, Info: info}
		var body strings.Builder
		j := i + 1
		for ; j < len(lines); j++ {
			if codeFenceCloses(lines[j], fence) {
				b.Closed = true
				break
			}
			body.WriteString(lines[j])
		}
		b.Body = body.String()
		out = append(out, b)
		i = j
	}
	return out
}

// fenceOf returns the fence (three or more ` or ~) that opens line l, or "".
func codeFenceOf(l string) string {
	if len(l) < 3 || (l[0] != '`' && l[0] != '~') {
		return ""
	}
	n := 0
	for n < len(l) && l[n] == l[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return l[:n]
}

// closes reports whether line closes a block opened by fence: it holds,
// besides white space, only a run of fence's character at least as long.
func codeFenceCloses(line, fence string) bool {
	c := strings.TrimSpace(line)
	return strings.HasPrefix(c, fence) && strings.Trim(c, fence[:1]) == ""
}
