package main

import (
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
	"github.com/spf13/pflag"
)

// docSection returns the part of doc under the "## " heading that names
// "`<path>`", up to the next "## " heading.
func docSection(doc, path string) (string, bool) {
	lines := strings.Split(doc, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "## ") || !strings.Contains(line, "`"+path+"`") {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], "## ") {
				end = j
				break
			}
		}
		return strings.Join(lines[i:end], "\n"), true
	}
	return "", false
}

var envName = regexp.MustCompile(`^(CAPSTAN|ANTHROPIC|OPENAI|OTEL|CLAUDE|XDG)_[A-Z0-9_]*[A-Z0-9]$`)

// docs/cli.md lists every command with each of its flags, the exit codes,
// and every environment variable the code reads.
func TestCLIReferenceIsComplete(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	walkCommands(newRootCmd(), func(c *cobra.Command) {
		if c.Hidden || !c.HasParent() {
			return
		}
		path := c.CommandPath()
		if c.HasSubCommands() {
			if !strings.Contains(doc, path+" ") {
				t.Errorf("docs/cli.md does not mention %q", path)
			}
			return
		}
		sec, ok := docSection(doc, path)
		if !ok {
			t.Errorf("docs/cli.md has no section for `%s`", path)
			return
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			if !strings.Contains(sec, "--"+f.Name) {
				t.Errorf("docs/cli.md section of %s lacks --%s", path, f.Name)
			}
			if f.Shorthand != "" && !strings.Contains(sec, "-"+f.Shorthand) {
				t.Errorf("docs/cli.md section of %s lacks -%s", path, f.Shorthand)
			}
		})
	})
	for _, code := range []string{"| `0` |", "| `1` |", "| `2` |", "| `3` |", "| `4` |"} {
		if !strings.Contains(doc, code) {
			t.Errorf("docs/cli.md lacks exit code row %s", code)
		}
	}

	fset := token.NewFileSet()
	filepath.WalkDir(filepath.Join("..", ".."), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && d.Name() != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(s) && !strings.Contains(doc, "`"+s+"`") {
					t.Errorf("%s: environment variable %s is not in docs/cli.md", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
		return nil
	})
}

// A command that docs or messages quote in backticks ("`capstan show RUN`")
// exists, and so does every flag they give it: a newcomer pastes it.
func TestQuotedCommandsExist(t *testing.T) {
	for line, want := range map[string]string{
		"show RUN --bogus":                      "--bogus",
		"show RUN --workdir D":                  "",
		"runs --all":                            "",
		"pipeline run --journal-dir=D x":        "",
		"pipeline run --workdir D x":            "--workdir",
		"run DIR --name bob --workdir W":        "",
		"report RUN -o - --format md | less -x": "",
	} {
		if got := unknownFlag(line); got != want {
			t.Errorf("unknownFlag(%q) = %q, want %q", line, got, want)
		}
	}
	known := map[string]bool{"help": true, "completion": true} // cobra adds these when it runs
	for _, c := range newRootCmd().Commands() {
		known[c.Name()] = true
	}
	quoted := regexp.MustCompile("`capstan ([a-z][a-z-]*)")
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if strings.HasSuffix(name, "_test.go") || name == "CHANGELOG.md" || !(strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".md")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
			if !known[m[1]] {
				t.Errorf("%s quotes `capstan %s`, which is not a command", path, m[1])
			}
		}
		for _, m := range quotedLine.FindAllStringSubmatch(string(b), -1) {
			if bad := unknownFlag(m[1]); bad != "" {
				t.Errorf("%s quotes `capstan %s`, whose command has no flag %s", path, m[1], bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// quotedLine is a whole command quoted in code: `capstan show RUN --workdir W`.
var quotedLine = regexp.MustCompile("`capstan ([a-z][^`\n]*)`")

// unknownFlag returns the first --flag of a quoted command line (the words
// after "capstan") that its command does not have, "" when there is none.
// Agent parameter flags of run and submit, placeholders (--<parameter>)
// and what follows a shell operator are not checked.
func unknownFlag(line string) string {
	words := strings.Fields(line)
	for i, w := range words {
		if strings.ContainsAny(w, "|;&>") {
			words = words[:i]
			break
		}
	}
	cmd, rest, err := newRootCmd().Find(words)
	if err != nil || cmd == nil {
		return ""
	}
	if path := cmd.CommandPath(); !cmd.HasParent() || path == "capstan run" || path == "capstan submit" {
		return ""
	}
	for _, w := range rest {
		name, _, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		if !strings.HasPrefix(w, "--") || name == "" || strings.ContainsAny(name, "<[.…") {
			continue
		}
		if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil && name != "help" {
			return w
		}
	}
	return ""
}
