package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/event"
)

// printProtected prints a baseline of protected files: the globs and each
// file's digest when the run started (or the step was entered).
func printProtected(w io.Writer, b *event.ProtectBaseline) {
	if b == nil {
		return
	}
	if b.Step != "" {
		fmt.Fprintf(w, "protected in step %s (%s): %d files when it was entered\n", b.Step, strings.Join(b.Globs, ", "), len(b.Files))
	} else {
		fmt.Fprintf(w, "protected (%s): %d files at the start\n", strings.Join(b.Globs, ", "), len(b.Files))
	}
	paths := make([]string, 0, len(b.Files))
	for p := range b.Files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "   %s  %s\n", b.Files[p].Digest, p)
	}
}

// printCannotComplete prints the model's declaration that the task cannot
// be done as specified.
func printCannotComplete(w io.Writer, d *event.CannotComplete) {
	if d == nil {
		return
	}
	fmt.Fprintf(w, "the model declared in iteration %d that the task cannot be done as specified:\n%s\n", d.Iteration, indent(d.Reason))
	if d.Evidence != "" {
		fmt.Fprintf(w, "evidence:\n%s\n", indent(d.Evidence))
	}
}

// indent indents every line of s by three spaces.
func indent(s string) string {
	return "   " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   ")
}
