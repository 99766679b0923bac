package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
)

// allowKeyInAncestorsFlag is the flag that lets an unsandboxed run start
// while a process above capstan holds a provider key.
const allowKeyInAncestorsFlag = "allow-key-in-ancestors"

// toolsSandboxed reports whether the run's Bash commands, command
// validators, subprocess steps and MCP servers run in the sandbox: the
// agent does not opt out, and, where it sets allowUnsandboxed, the
// machine can sandbox.
func toolsSandboxed(ctx context.Context, def *agentdir.Agent) bool {
	sb := def.Definition().Runner.Boundaries.Sandbox
	if !sb.On() {
		return false
	}
	return sb == nil || !sb.AllowUnsandboxed || sandbox.Probe(ctx).Sandboxes()
}

// agentSandboxHint is the safer way out of KEY_IN_ANCESTOR for an agent
// run: run its tools in the sandbox.
const agentSandboxHint = `run the agent in the sandbox (the default: drop --no-sandbox, or "enabled": false from runner.boundaries.sandbox in agent.json)`

// checkAncestorKeys refuses a run whose tools are not sandboxed while a
// process that started capstan (its parent, the parent's parent, …: a
// `timeout`, `make`, `go run` or a CI step's `bash -c`) holds a provider
// key in its environment block: capstan wipes its own, but the model's
// unsandboxed Bash runs with the user's rights and can read
// /proc/<ancestor>/environ. A variable named as a provider key, or holding
// the value of the provider key capstan was given, counts. args is the
// command line, repeated in the hint with the flag that allows it; safer
// says how to run sandboxed instead.
func checkAncestorKeys(args []string, getenv func(string) string, safer string) error {
	var values []string
	for _, n := range proc.ProviderKeyNames() {
		if v := getenv(n); len(v) >= proc.MinSecretLen {
			values = append(values, v)
		}
	}
	found := proc.AncestorsHolding(proc.ProviderKeyNames(), values)
	if len(found) == 0 {
		return nil
	}
	var where []string
	for _, a := range found {
		where = append(where, fmt.Sprintf("%s of %s", strings.Join(a.Vars, ", "), a))
	}
	e := agenterr.New(agenterr.CodeKeyInAncestor, agenterr.LayerLifecycle, false,
		"this run's tools are not sandboxed, and a process that started capstan holds a provider key in its environment (%s): the model's Bash could read it from /proc/<pid>/environ",
		strings.Join(where, "; "))
	e.Hint = safer + ", or start capstan from a process that does not hold the key; to run unsandboxed anyway: " +
		allowedCommand(args)
	return e
}

// allowedCommand is the command line args (os.Args) with
// --allow-key-in-ancestors added, quoted for a POSIX shell. The program
// is named as the user ran it; a relative path is made absolute so the
// line works pasted from anywhere the key was not moved.
func allowedCommand(args []string) string {
	if len(args) == 0 {
		return "capstan --" + allowKeyInAncestorsFlag
	}
	prog := args[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		if abs, err := filepath.Abs(prog); err == nil {
			prog = abs
		}
	} else if !strings.Contains(prog, "/") {
		if exe, err := os.Executable(); err == nil && filepath.Base(exe) != prog {
			prog = exe
		}
	}
	words := []string{shellQuote(prog)}
	for _, a := range args[1:] {
		words = append(words, shellQuote(a))
	}
	// At the end: run reads its flags after DIR too, also after a "--"
	// that only marks DIR.
	words = append(words, "--"+allowKeyInAncestorsFlag)
	return strings.Join(words, " ")
}
