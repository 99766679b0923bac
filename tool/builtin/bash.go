package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/tool"
)

type bashTool struct {
	ws      *workspace
	runner  tool.CommandRunner
	timeout time.Duration
	env     []string
	// envLater is Config.EnvLater, called by the first command (under
	// envOnce) and then dropped.
	envLater func() []string
	envOnce  sync.Once
}

// commandEnv is the environment of a command: env, with envLater's
// entries set the first time.
func (t *bashTool) commandEnv() []string {
	t.envOnce.Do(func() {
		if t.envLater != nil {
			t.env = withEntries(t.env, t.envLater())
			t.envLater = nil
		}
	})
	return t.env
}

// withEntries is env with each "KEY=value" entry of set in place of env's
// entry of that name, sorted by name like proc.ForCommands' result; env
// itself is not changed (agents may share it).
func withEntries(env, set []string) []string {
	if len(set) == 0 {
		return env
	}
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.ContainsFunc(set, func(e string) bool {
			k, _, _ := strings.Cut(e, "=")
			return k == name
		})
	})
	out = append(out, set...)
	slices.SortStableFunc(out, func(a, b string) int {
		an, _, _ := strings.Cut(a, "=")
		bn, _, _ := strings.Cut(b, "=")
		return strings.Compare(an, bn)
	})
	return slices.Clip(out)
}

type bashInput struct {
	Command     string   `json:"command"`
	Timeout     *float64 `json:"timeout"`
	Description string   `json:"description"`
}

func (t *bashTool) Kind() tool.Kind { return tool.KindExecute }

func (t *bashTool) Spec() tool.Spec {
	return spec(NameBash, fmt.Sprintf("Runs a shell command (bash -c) in the working directory and returns its combined stdout and stderr "+
		"and, when non-zero, its exit status. Commands time out after %s by default (timeout in milliseconds, at most %d); "+
		"on timeout the command and every process it started are killed, and background processes do not outlive the command. "+
		"There is no stdin. Use Read, Glob and Grep rather than cat, find and grep to look at files.",
		t.timeout, MaxBashTimeout.Milliseconds()), fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The command to run"},
    "timeout": {"type": "number", "minimum": 1, "maximum": %d, "description": "Timeout in milliseconds"},
    "description": {"type": "string", "description": "What the command does, in a few words"}
  },
  "required": ["command"],
  "additionalProperties": false
}`, MaxBashTimeout.Milliseconds()))
}

func (t *bashTool) Run(ctx context.Context, input json.RawMessage) (tool.Result, error) {
	var in bashInput
	if err := decode(NameBash, input, &in, "command", "timeout", "description"); err != nil {
		return failure(err), nil
	}
	if strings.TrimSpace(in.Command) == "" {
		return failure(inputErr(NameBash, "command is empty")), nil
	}
	timeout := t.timeout
	var note string
	if in.Timeout != nil {
		ms := *in.Timeout
		if ms <= 0 || math.IsNaN(ms) {
			return failure(inputErr(NameBash, "timeout must be a positive number of milliseconds, got %v", ms)), nil
		}
		if ms > float64(MaxBashTimeout.Milliseconds()) {
			note = fmt.Sprintf("[timeout %vms exceeds the maximum; using %s]\n", ms, MaxBashTimeout)
			timeout = MaxBashTimeout
		} else {
			timeout = max(time.Duration(ms*float64(time.Millisecond)), time.Millisecond)
		}
	}
	res, err := t.runner.Run(ctx, tool.CommandSpec{
		Command:   in.Command,
		Dir:       t.ws.root,
		Env:       t.commandEnv(),
		Timeout:   timeout,
		MaxOutput: t.ws.maxOut,
	})
	if err != nil {
		return tool.Result{}, err
	}
	var b strings.Builder
	b.WriteString(note)
	b.WriteString(res.Output)
	if res.Output == "" {
		b.WriteString("(no output)")
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	isErr := false
	switch {
	case res.TimedOut:
		isErr = true
		fmt.Fprintf(&b, "[command timed out after %s; it and every process it started were killed]", timeout)
	case res.Signal != "":
		isErr = true
		fmt.Fprintf(&b, "[command killed by signal: %s]", res.Signal)
	case res.ExitCode != 0:
		isErr = true
		fmt.Fprintf(&b, "[exit status %d]", res.ExitCode)
	}
	return tool.Result{Content: strings.TrimSuffix(b.String(), "\n"), IsError: isErr}, nil
}
