// Package github is capstan's own use of GitHub through the GitHub CLI
// (gh): the one way capstan runs gh (CLI: a trusted executable, gh's
// minimal environment, a bounded time, the pinned repository named in
// every call), the repository a run is pinned to (Repo, RemoteRepo), the
// issue and label operations issue-driven workflows use, and the
// read-only github_read tool a model gets. gh runs outside the sandbox
// with capstan's credentials, so nothing a model controls reaches its
// command line except as a number or a --flag=value pair.
package github

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/proc"
)

// CLI runs gh as capstan's own process. Path must be a gh the model
// cannot have written (not under the work dir: proc.LookPath finds
// one); Env is its whole environment (nil: proc.ForGitHubCLI of
// capstan's, which holds gh's token and host settings and no model keys).
type CLI struct {
	// Path is the gh executable.
	Path string
	// Env is gh's whole environment; nil is proc.ForGitHubCLI of
	// capstan's environment.
	Env []string
	// Dir is where gh runs (its repository, unless Repo is set).
	Dir string
	// Repo is OWNER/NAME passed as --repo; "" lets gh use Dir's.
	Repo string
	// Timeout bounds one call (default 60 s).
	Timeout time.Duration
}

// Call is what one gh call did.
type Call struct {
	// Args are gh's arguments, --repo included.
	Args           []string
	Stdout, Stderr []byte
	// ExitCode is gh's exit status; -1 when it failed without one (it
	// could not start, or was killed).
	ExitCode int
	Duration time.Duration
	// Err is why the call failed (nil when gh exited 0).
	Err error
	// TimedOut is set when the call was stopped by its time bound (or by
	// the caller's context).
	TimedOut bool
}

// Run runs gh once with args (and --repo when Repo is set) and reports
// what it did; a failure is in the Call, not returned.
func (c *CLI) Run(ctx context.Context, args ...string) Call {
	if c.Repo != "" {
		args = append(args, "--repo", c.Repo)
	}
	d := c.Timeout
	if d <= 0 {
		d = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Path, args...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	if cmd.Env == nil {
		cmd.Env = proc.ForGitHubCLI(os.Environ())
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	call := Call{Args: args, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start), Err: err}
	if cmd.ProcessState != nil {
		call.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		call.TimedOut = ctx.Err() != nil
		if call.ExitCode == 0 {
			call.ExitCode = -1
		}
	}
	return call
}

// Output runs gh once and returns its standard output, or an error that
// names the call and carries what gh printed on standard error.
func (c *CLI) Output(ctx context.Context, args ...string) ([]byte, error) {
	call := c.Run(ctx, args...)
	if call.Err != nil {
		return nil, fmt.Errorf("gh %s: %w: %s", strings.Join(call.Args, " "), call.Err, strings.TrimSpace(string(call.Stderr)))
	}
	return call.Stdout, nil
}
