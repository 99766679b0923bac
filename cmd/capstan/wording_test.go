package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// specWords are references to sections of the design specification
// ("seed 004", "layer 3", "§15"), which a user or a reader of the code
// cannot look up.
var specWords = regexp.MustCompile(`(?i)\bseed[ -]?0\d\d\b|\blayer[ -]-?\d(\.5)?\b|§ ?\d`)

// walkCommands calls f for root and every command under it.
func walkCommands(root *cobra.Command, f func(*cobra.Command)) {
	f(root)
	for _, c := range root.Commands() {
		walkCommands(c, f)
	}
}

// User-facing text names what things do, not which specification section
// they came from: README, docs, examples, every command's help, and every
// string literal and comment in the code (errors, hints, messages, package
// and doc comments) outside tests.
func TestNoSpecificationReferencesInUserText(t *testing.T) {
	repo := filepath.Join("..", "..")
	var docs []string
	docs = append(docs, filepath.Join(repo, "README.md"), filepath.Join(repo, "CHANGELOG.md"))
	for _, dir := range []string{"docs", "examples"} {
		filepath.WalkDir(filepath.Join(repo, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
				docs = append(docs, p)
			}
			return nil
		})
	}
	for _, p := range docs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := specWords.FindString(line); m != "" {
				t.Errorf("%s:%d: %q in %q", p, i+1, m, line)
			}
		}
	}

	walkCommands(newRootCmd(), func(c *cobra.Command) {
		var help bytes.Buffer
		c.SetOut(&help)
		c.SetErr(&help)
		if err := c.Help(); err != nil {
			t.Fatal(err)
		}
		if m := specWords.FindString(help.String()); m != "" {
			t.Errorf("help of %q says %q", c.CommandPath(), m)
		}
	})

	fset := token.NewFileSet()
	filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != repo {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if m := specWords.FindString(c.Text); m != "" {
					t.Errorf("%s: comment %q says %q: say what the code does instead", fset.Position(c.Pos()), truncateString(c.Text, 80), m)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				s = lit.Value
			}
			if m := specWords.FindString(s); m != "" {
				t.Errorf("%s: string %q says %q", fset.Position(lit.Pos()), truncateString(s, 80), m)
			}
			return true
		})
		return nil
	})
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
