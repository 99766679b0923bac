package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/verify"
)

// SubprocessTool is the name a subprocess step's command carries in the
// iteration's tool uses and action results: a step check of type action
// with actions ["subprocess"] passes when the command exited 0.
const SubprocessTool = "subprocess"

// defaultSubprocessTimeout bounds a subprocess step whose runner has no
// timeout.
const defaultSubprocessTimeout = 30 * time.Second

// subprocessBridge runs a subprocess step's command in place of a model
// call. It is an llm.Bridge so that the loop journals and counts the
// iteration like any other (query.start, query.result, iteration.end): the
// command's stdout is the response, a JSON object on stdout is the
// structured output, and the run of the command is one tool use named
// "subprocess" whose error flag is a non-zero exit, a timeout or a
// command that could not start.
type subprocessBridge struct {
	argv    []string
	workDir string
	env     []string // runner.boundaries.env (see proc.ForCommands)
	timeout time.Duration
	emit    event.Emitter // receives the run as a tool.call event
	// sandbox runs the command when runner.boundaries.sandbox is enabled
	// (nil: unsandboxed, like validator commands).
	sandbox *sandbox.CommandRunner
}

// subprocessInput is the tool-use input journaled for a subprocess run.
type subprocessInput struct {
	Command   string   `json:"command"`
	Args      []string `json:"args,omitempty"`
	TimeoutMs int64    `json:"timeoutMs"`
}

// newSubprocess prepares step st's command with the run's parameter
// values: ${context.NAME} in the command or an argument is replaced by
// parameter NAME's value. A name without a value is a CONFIG_INVALID error
// located at the argument.
func (a *Agent) newSubprocess(ctx context.Context, id string, st agentdir.Step) (*subprocessBridge, error) {
	r := st.Runner
	value := func(name string) (string, bool) {
		v, ok := a.vars[name]
		return v, ok && v != ""
	}
	argv := make([]string, 0, 1+len(r.Args))
	for i, arg := range append([]string{r.Command}, r.Args...) {
		out, missing, ok := agentdir.ExpandContext(arg, value)
		if !ok {
			ptr := agentdir.JoinPointer("steps", id, "runner", "command")
			if i > 0 {
				ptr = agentdir.JoinPointer("steps", id, "runner", "args", fmt.Sprint(i-1))
			}
			e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"subprocess step %s: ${context.%s} has no value", id, missing)
			e.File, e.Pointer = registryFile(a.spec), ptr
			e.Hint = "pass " + a.spec.Parameters[missing].Flag(missing) + " to capstan run, or give the parameter a default"
			return nil, e
		}
		argv = append(argv, out)
	}
	timeout := defaultSubprocessTimeout
	if r.Timeout > 0 {
		timeout = time.Duration(r.Timeout) * time.Millisecond
	}
	b := &subprocessBridge{argv: argv, workDir: a.workDir, env: a.spec.Runner.Boundaries.Env, timeout: timeout, emit: a.emit}
	b.sandbox = a.sandbox
	return b, nil
}

// display is the command line as the journal and `capstan show` print it.
func (b *subprocessBridge) display() string {
	q := make([]string, len(b.argv))
	for i, a := range b.argv {
		q[i] = a
		if !plainWord().MatchString(a) {
			q[i] = verify.ShellQuote(a)
		}
	}
	return "$ " + strings.Join(q, " ")
}

// plainWord is an argument the shell reads as itself.
var plainWord = lazyre.New(`^[A-Za-z0-9_./:=@%+,-]+$`)

// Query implements llm.Bridge: it runs the command (no shell; in the
// sandbox when the agent enables it) and reports its outcome. Only a canceled ctx is an error; a failing command is a
// result whose tool use is an error.
func (b *subprocessBridge) Query(ctx context.Context, _ string, _ llm.QueryOptions) (*event.QueryResult, error) {
	q := make([]string, len(b.argv))
	for i, a := range b.argv {
		q[i] = verify.ShellQuote(a)
	}
	// verify.RunCommand is the one implementation of running a command
	// for capstan (environment policy, process group, timeout, output
	// caps); the arguments are quoted so the shell passes them unchanged.
	var out event.ValidatorOutput
	if b.sandbox != nil {
		res, stderr, err := b.sandbox.RunArgv(ctx, b.argv, tool.CommandSpec{Dir: b.workDir, Timeout: b.timeout,
			Env: proc.ForCommands(os.Environ(), b.env)})
		if err != nil {
			return nil, err
		}
		out = event.ValidatorOutput{Stdout: res.Output, Stderr: stderr, ExitCode: res.ExitCode, TimedOut: res.TimedOut,
			Truncated: res.Truncated, DurationMs: res.Duration.Milliseconds()}
	} else {
		var err error
		if out, err = verify.RunCommand(ctx, verify.CommandSpec{Command: "exec " + strings.Join(q, " "), Dir: b.workDir,
			Timeout: b.timeout, Env: b.env}); err != nil {
			return nil, err
		}
	}
	input, _ := json.Marshal(subprocessInput{Command: b.argv[0], Args: b.argv[1:], TimeoutMs: b.timeout.Milliseconds()})
	use := event.ToolUse{ID: "subprocess", Name: SubprocessTool, Input: input, DurationMs: out.DurationMs,
		Output: subprocessReport(out), IsError: out.ExitCode != 0 || out.TimedOut}
	b.emit.Emit(use)
	res := &event.QueryResult{Responses: []string{}, ToolUses: []event.ToolUse{use}, StopReason: fmt.Sprintf("exit %d", out.ExitCode)}
	if out.TimedOut {
		res.StopReason = "timeout"
	}
	if strings.TrimSpace(out.Stdout) != "" {
		res.Responses = append(res.Responses, out.Stdout)
	}
	if so := strings.TrimSpace(out.Stdout); strings.HasPrefix(so, "{") && json.Valid([]byte(so)) {
		res.StructuredOutput = json.RawMessage(so)
	}
	return res, nil
}

// subprocessReport is the tool-use output: stdout, stderr and how the
// command ended.
func subprocessReport(o event.ValidatorOutput) string {
	var b strings.Builder
	b.WriteString(o.Stdout)
	if o.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(o.Stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	switch {
	case o.TimedOut:
		b.WriteString("[timed out]")
	default:
		fmt.Fprintf(&b, "[exit status %d]", o.ExitCode)
	}
	return b.String()
}

// SessionID implements llm.Bridge: a subprocess has no session.
func (b *subprocessBridge) SessionID() string { return "" }

// Close implements llm.Bridge.
func (b *subprocessBridge) Close() error { return nil }

// subprocessFailure is the run's error when the iteration of a
// subprocess step would complete the run although its command failed: a
// failed command never completes a run. nil when s is not such an
// iteration.
func subprocessFailure(runID, id string, st agentdir.Step, s *event.IterationSummary) error {
	if st.Runner == nil {
		return nil
	}
	for _, u := range s.ToolsUsed {
		if u.Name == SubprocessTool && u.IsError {
			e := agenterr.New(agenterr.CodeStepSubprocess, agenterr.LayerStep, true,
				"subprocess step %s failed: %s", id, lastLine(u.Output))
			e.Hint = "see the command's output with `capstan show " + runID + "`; `capstan resume " + runID + "` runs the step again"
			return e
		}
	}
	return nil
}

// lastLine is the end of a command's output for a one-line message: its
// last three non-blank lines, trimmed and joined by spaces.
func lastLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " ")
}

// subprocessOnly reports whether every step of reg is a subprocess step
// (such an agent needs no model).
func subprocessOnly(reg *agentdir.Registry) bool {
	if reg == nil || len(reg.Steps) == 0 {
		return false
	}
	for _, st := range reg.Steps {
		if st.Runner == nil {
			return false
		}
	}
	return true
}

// noModel is the bridge of an agent whose steps all run commands: any
// model call (a prompt-type check's judge) is an error saying so.
type noModel struct{}

// Query implements llm.Bridge.
func (noModel) Query(context.Context, string, llm.QueryOptions) (*event.QueryResult, error) {
	e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false,
		"this agent's steps all run commands, so it has no model, but a model call was asked for (a prompt check?)")
	e.Hint = "set runner.model in agent.json or pass --model provider:model"
	return nil, e
}

// SessionID implements llm.Bridge.
func (noModel) SessionID() string { return "" }

// Close implements llm.Bridge.
func (noModel) Close() error { return nil }
