package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
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
	// env is built by the first command (under envOnce) from the process
	// environment, allow (Config.Env) and envLater's entries (Config.EnvLater,
	// dropped then): an agent that runs no command builds none.
	env      []string
	allow    []string
	envLater func() []string
	envOnce  sync.Once
}

// commandEnv is the environment of a command, built the first time.
func (t *bashTool) commandEnv() []string {
	t.envOnce.Do(func() {
		allow := t.allow
		if t.envLater != nil {
			if extra := t.envLater(); len(extra) > 0 {
				allow = append(slices.Clone(allow), extra...)
			}
			t.envLater = nil
		}
		t.env = commandEnv(os.Environ(), allow)
	})
	return t.env
}

type bashInput struct {
	Command     string   `json:"command"`
	Timeout     *float64 `json:"timeout"`
	Description string   `json:"description"`
}

func (t *bashTool) Kind() tool.Kind { return tool.KindExecute }

func (t *bashTool) Spec() tool.Spec {
	bashSpecs.Lock()
	defer bashSpecs.Unlock()
	if s, ok := bashSpecs.m[t.timeout]; ok {
		return s
	}
	if bashSpecs.m == nil {
		bashSpecs.m = make(map[time.Duration]tool.Spec)
	}
	s := t.newSpec()
	bashSpecs.m[t.timeout] = s
	return s
}

// bashSpecs holds Bash's spec by default timeout (one or two values in a
// process): its description names the timeout, and every agent asks for
// it when it builds its tools.
var bashSpecs struct {
	sync.Mutex
	m map[time.Duration]tool.Spec
}

func (t *bashTool) newSpec() tool.Spec {
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
