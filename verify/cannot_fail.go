package verify

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// WhyCannotFail says why the shell command a command validator runs
// (sh -c COMMAND) exits 0 whatever the work dir holds, so that a check
// made of it passes always: "" when the command can fail, or when
// capstan cannot tell. It recognises a command that is empty or a comment,
// one that only sets variables (X=1), true and :, exit 0, a command sent
// to the background, and lists and pipes whose exit status is one of
// those (go test || true, go test | true). A command it cannot parse, or
// one that defines functions or runs set, exit, trap, eval, exec,
// source, return or kill before its last command, is left to run: those
// can change what the last command's status means.
func WhyCannotFail(command string) string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(command), "")
	if err != nil {
		return ""
	}
	return stmtsCannotFail(f.Stmts)
}

// stmtsCannotFail is WhyCannotFail for a list of statements: their exit
// status is the last one's.
func stmtsCannotFail(stmts []*syntax.Stmt) string {
	if len(stmts) == 0 {
		return "it runs no command (it is empty or only a comment)"
	}
	for _, s := range stmts[:len(stmts)-1] {
		if changesControl(s) {
			return ""
		}
	}
	return stmtCannotFail(stmts[len(stmts)-1])
}

func stmtCannotFail(s *syntax.Stmt) string {
	switch {
	case s.Negated || len(s.Redirs) > 0:
		return "" // ! inverts the status; a redirection can fail
	case s.Background:
		return "it runs in the background (&), and the shell exits 0 without waiting for it"
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		return callCannotFail(c)
	case *syntax.Block:
		return stmtsCannotFail(c.Stmts)
	case *syntax.Subshell:
		return stmtsCannotFail(c.Stmts)
	case *syntax.BinaryCmd:
		x, y := stmtCannotFail(c.X), stmtCannotFail(c.Y)
		switch c.Op {
		case syntax.OrStmt:
			if x != "" {
				return x
			}
			if y != "" {
				return "the command after || always succeeds: " + y
			}
		case syntax.AndStmt:
			if x != "" && y != "" {
				return y
			}
		case syntax.Pipe:
			if y != "" {
				return "a pipe's exit status is its last command's, and that one always succeeds: " + y
			}
		}
	}
	return ""
}

// callCannotFail is stmtCannotFail for a simple command: assignments
// only, true, :, or exit 0, with words that expand without running
// anything or failing.
func callCannotFail(c *syntax.CallExpr) string {
	for _, a := range c.Assigns {
		if a.Array != nil || a.Index != nil || (a.Value != nil && !plainWord(a.Value)) {
			return ""
		}
	}
	for _, w := range c.Args {
		if !plainWord(w) {
			return ""
		}
	}
	if len(c.Args) == 0 {
		names := make([]string, 0, len(c.Assigns))
		for _, a := range c.Assigns {
			names = append(names, a.Name.Value)
		}
		return fmt.Sprintf("it only sets the shell variable %s and runs no command", strings.Join(names, ", "))
	}
	switch name := c.Args[0].Lit(); {
	case name == "true" || name == ":":
		return fmt.Sprintf("it runs %s, which always succeeds", name)
	case name == "exit" && len(c.Args) == 2 && c.Args[1].Lit() == "0":
		return "it ends with exit 0"
	}
	return ""
}

// plainWord reports whether w expands without running a command or
// failing: literals, quotes, and $name or ${name}.
func plainWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if !plainPart(p) {
			return false
		}
	}
	return true
}

func plainPart(p syntax.WordPart) bool {
	switch p := p.(type) {
	case *syntax.Lit, *syntax.SglQuoted:
		return true
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			if !plainPart(q) {
				return false
			}
		}
		return true
	case *syntax.ParamExp:
		return p.Param != nil && !p.Excl && !p.Length && p.Index == nil &&
			p.Slice == nil && p.Repl == nil && p.Names == 0 && p.Exp == nil
	}
	return false
}

// controlBuiltins change how the shell exits or what later commands mean.
var controlBuiltins = map[string]bool{
	"set": true, "exit": true, "trap": true, "eval": true, "exec": true,
	".": true, "source": true, "return": true, "kill": true, "alias": true,
}

// changesControl reports whether s defines a function or runs a builtin
// of controlBuiltins anywhere in it.
func changesControl(s *syntax.Stmt) bool {
	found := false
	syntax.Walk(s, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			found = true
		case *syntax.CallExpr:
			if len(n.Args) > 0 && controlBuiltins[n.Args[0].Lit()] {
				found = true
			}
		}
		return !found
	})
	return found
}
