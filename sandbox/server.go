package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// serverLifetime bounds how long a server started with StartServer runs
// (wall clock and, per process, CPU seconds): a run's servers live as long
// as the run, and Close ends them.
const serverLifetime = 7 * 24 * time.Hour

// Server is a program started by StartServer that speaks on its standard
// input and output for as long as its caller needs it (an MCP stdio
// server). It runs in the same sandbox as the Bash tool's commands.
type Server struct {
	// Stdin is the program's standard input; closing it is how the
	// program is asked to stop (see Close).
	Stdin io.WriteCloser
	// Stdout is the program's standard output; it ends when the program
	// has ended.
	Stdout io.ReadCloser

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	res    Result
	err    error
	stderr *cappedBuffer
	stdinW *os.File
}

// StartServer starts argv in dir, in the sandbox, with the environment
// env (PATH confined as for commands; HOME and TMPDIR private), as a
// long-lived program reached through the returned Server's pipes. The work
// dir dir is its only writable directory; it reads the system
// directories, dir, its program and the absolute paths in readOnly, and
// reaches the network only as the runner's Config allows. It ends when
// Close is called or ctx is done.
func (c *CommandRunner) StartServer(ctx context.Context, argv []string, dir string, env []string, readOnly []string) (*Server, error) {
	return c.start(ctx, tool.ProgramSpec{Argv: argv, Dir: dir, Env: env, ReadOnly: readOnly})
}

// start is StartServer with further writable directories and network
// pairs (StartProgram).
func (c *CommandRunner) start(ctx context.Context, p tool.ProgramSpec) (*Server, error) {
	for _, path := range append(slices.Clone(p.ReadOnly), p.Writable...) {
		if !filepath.IsAbs(path) {
			return nil, agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, false, "path %q is not absolute", path)
		}
	}
	box := *c
	box.ReadOnly = append(append([]string(nil), c.ReadOnly...), p.ReadOnly...)
	box.Cache = nil
	if len(p.NetworkAllow) > 0 && c.Runner != nil && !c.Runner.cfg.Network {
		if _, err := newAllowList(p.NetworkAllow); err != nil {
			return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "network allow-list")
		}
		r := *c.Runner
		r.cfg.NetworkAllow = append(slices.Clone(c.Runner.cfg.NetworkAllow), p.NetworkAllow...)
		box.Runner = &r
	}
	spec, cleanup, err := box.spec(ctx, p.Argv, tool.CommandSpec{Dir: p.Dir, Env: p.Env, Timeout: serverLifetime})
	if err != nil {
		return nil, err
	}
	spec.Writable = append(spec.Writable, p.Writable...)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		cleanup()
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "server stdin pipe")
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		cleanup()
		stdinR.Close()
		stdinW.Close()
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "server stdout pipe")
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv := &Server{Stdout: stdoutR, cancel: cancel, done: make(chan struct{}), stderr: &cappedBuffer{max: 64 << 10},
		stdinW: stdinW}
	srv.Stdin = serverStdin{File: stdinW, srv: srv}
	spec.StdinStream, spec.Stdout, spec.Stderr = stdinR, stdoutW, srv.stderr
	go func() {
		defer close(srv.done)
		defer cleanup()
		res, err := box.Runner.Run(runCtx, spec)
		// The program has ended: its output ends for the reader too.
		stdoutW.Close()
		stdinR.Close()
		srv.mu.Lock()
		srv.res, srv.err = res, err
		srv.mu.Unlock()
	}()
	go func() {
		select {
		case <-ctx.Done():
			srv.Close()
		case <-srv.done:
		}
	}()
	return srv, nil
}

// StartProgram implements tool.ProgramSandbox: spec.Argv runs like a
// server of StartServer (the work dir spec.Dir writable, the system
// directories, spec.Dir and spec.ReadOnly readable), and may also write
// spec.Writable and reach spec.NetworkAllow through the sandbox's
// allow-list proxy. The claude CLI runs in it, and every tool it runs
// with it.
func (c *CommandRunner) StartProgram(ctx context.Context, spec tool.ProgramSpec) (tool.Program, error) {
	srv, err := c.start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return program{srv: srv, isolation: c.describe(spec.NetworkAllow)}, nil
}

// describe names the confinement of a program of StartProgram that may
// reach the extra pairs allow.
func (c *CommandRunner) describe(allow []string) string {
	caps := c.Runner.Capabilities()
	var parts []string
	if caps.Namespaces {
		parts = append(parts, "namespaces")
	}
	if caps.LandlockABI > 0 {
		parts = append(parts, fmt.Sprintf("landlock:v%d", caps.LandlockABI))
	}
	switch all := append(slices.Clone(c.Runner.cfg.NetworkAllow), allow...); {
	case c.Runner.cfg.Network:
		parts = append(parts, "network: every host")
	case len(all) > 0:
		parts = append(parts, "network: "+strings.Join(all, ", ")+" only")
	default:
		parts = append(parts, "network: none")
	}
	return strings.Join(parts, ", ")
}

// program is a Server as a tool.Program.
type program struct {
	srv       *Server
	isolation string
}

func (p program) Stdin() io.WriteCloser { return p.srv.stdinW }
func (p program) Stdout() io.Reader     { return p.srv.Stdout }
func (p program) Stderr() string        { return p.srv.Stderr() }
func (p program) Describe() string      { return "sandboxed: " + p.isolation }

// Stop ends the program: kill at once, or close its input first.
func (p program) Stop(kill bool) {
	if kill {
		p.srv.cancel()
		return
	}
	go p.srv.Close()
}

// Wait waits for the program; a run that did not end with exit code 0 is
// an error naming how it ended.
func (p program) Wait() error {
	res, err := p.srv.Wait()
	if err != nil {
		return err
	}
	if res.Status == StatusOK {
		return nil
	}
	msg := string(res.Status)
	if res.Reason != "" {
		msg += ": " + res.Reason
	}
	return fmt.Errorf("in the sandbox: %s", msg)
}

// serverStdin closes the program's input and then ends the program.
type serverStdin struct {
	*os.File
	srv *Server
}

// Close closes the program's standard input and ends the program.
func (s serverStdin) Close() error {
	err := s.File.Close()
	s.srv.Close()
	return err
}

// serverGrace is how long a server may take to exit after its input
// closed before it is killed.
const serverGrace = 2 * time.Second

// Close asks the program to stop by closing its standard input, kills its
// process tree if it is still running after a grace period, and waits for
// it to be gone. It is safe to call more than once.
func (s *Server) Close() error {
	s.once.Do(func() {
		_ = s.stdinW.Close()
		select {
		case <-s.done:
		case <-time.After(serverGrace):
			s.cancel()
			<-s.done
		}
		s.cancel()
	})
	return nil
}

// Wait waits for the program to end and returns how it ended.
func (s *Server) Wait() (Result, error) {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res, s.err
}

// Stderr is the head of what the program wrote to standard error (64 KiB).
func (s *Server) Stderr() string {
	<-s.done
	return string(s.stderr.buf.Bytes())
}

// String names the server's state for errors.
func (s *Server) String() string {
	select {
	case <-s.done:
		res, err := s.Wait()
		if err != nil {
			return "not started: " + err.Error()
		}
		return fmt.Sprintf("ended (%s)", res.Status)
	default:
		return "running"
	}
}
