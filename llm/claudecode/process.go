package claudecode

import (
	"context"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/tool"
)

// hostProgram is the claude CLI started with the caller's rights (the run
// opted out of the sandbox), as a tool.Program: its process group is
// ended on Stop.
type hostProgram struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailBuffer
	grace  time.Duration
	once   sync.Once
	done   chan struct{}
}

// startHost starts argv in dir with env, unconfined.
func startHost(argv []string, dir string, env []string, grace time.Duration) (*hostProgram, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &hostProgram{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &tailBuffer{max: 16 << 10}, grace: grace, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *hostProgram) Stdin() io.WriteCloser { return p.stdin }
func (p *hostProgram) Stdout() io.Reader     { return p.stdout }
func (p *hostProgram) Stderr() string        { return p.stderr.String() }
func (p *hostProgram) Describe() string      { return "unsandboxed" }

// Stop sends SIGKILL to the group, or SIGTERM and SIGKILL after the
// grace period (children left behind get it too).
func (p *hostProgram) Stop(kill bool) {
	if kill {
		signalGroup(p.cmd, true)
		return
	}
	signalGroup(p.cmd, false)
	go func() {
		t := time.NewTimer(p.grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
		signalGroup(p.cmd, true)
	}()
}

func (p *hostProgram) Wait() error {
	err := p.cmd.Wait()
	p.once.Do(func() { close(p.done) })
	return err
}

// start starts the CLI with args: in the agent's sandbox when the Bridge
// has one, else with the caller's rights.
func (b *Bridge) start(ctx context.Context, args []string) (tool.Program, error) {
	argv := append(append([]string(nil), b.binary...), args...)
	if b.cfg.Sandbox == nil {
		return startHost(argv, b.cfg.WorkDir, b.env(), b.cfg.KillGrace)
	}
	spec, err := b.sandboxSpec(argv)
	if err != nil {
		return nil, err
	}
	return b.cfg.Sandbox.StartProgram(ctx, spec)
}
