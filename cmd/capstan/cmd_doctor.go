package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/claudecode"
	"github.com/capstan-dev/capstan/llm/modelspec"
	"github.com/capstan-dev/capstan/sandbox"
)

// Check statuses of `capstan doctor`.
const (
	checkOK   = "ok"
	checkWarn = "warn" // optional: some features will not work
	checkFail = "fail" // required: capstan cannot do its job
)

// doctorCheck is one line of `capstan doctor`.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}

// doctorEnv is what the checks read, so tests can give them a different
// world.
type doctorEnv struct {
	getenv   func(string) string
	lookPath func(string) (string, error)
	probe    func(context.Context) sandbox.Capabilities
}

func newDoctorCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this machine: API keys (never printed), the claude CLI, sandbox support, git, script interpreters, the user config",
		Long: `Check what capstan needs on this machine and say how to fix what is missing:
API keys per provider (only whether they are set, never their values), the
claude CLI and its version, sandbox support (user namespaces, Landlock ABI,
how the number of a script's processes is bounded), git, the interpreters skill scripts run with
(python3, node, bash), and the user config file.

The sandbox comes first: where the machine cannot sandbox (no user
namespaces, no Landlock) every run stops before it starts unless it opts
out with --no-sandbox, and doctor says what is missing.

Exit codes: 0 nothing required is missing; 1 something required is missing
(the sandbox; git; the key of the provider your default model uses; a CAPSTAN_MODEL whose
provider capstan does not know); 2 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := doctorEnv{getenv: os.Getenv, lookPath: exec.LookPath, probe: sandbox.Probe}
			checks := runDoctor(cmd.Context(), env)
			failed := 0
			for _, c := range checks {
				if c.Status == checkFail {
					failed++
				}
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), checks); err != nil {
					return withExit(exitInternal, err)
				}
			} else {
				printDoctor(cmd.OutOrStdout(), checks)
			}
			if failed > 0 {
				return withExit(exitNotCompleted, fmt.Errorf("doctor: %d required check(s) failed", failed))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	return cmd
}

func printDoctor(w io.Writer, checks []doctorCheck) {
	mark := map[string]string{checkOK: "ok  ", checkWarn: "warn", checkFail: "FAIL"}
	for _, c := range checks {
		fmt.Fprintf(w, "%s  %-22s %s\n", mark[c.Status], c.Name, c.Detail)
		if c.Hint != "" && c.Status != checkOK {
			fmt.Fprintf(w, "      %-22s → %s\n", "", c.Hint)
		}
	}
}

// runDoctor runs every check.
func runDoctor(ctx context.Context, env doctorEnv) []doctorCheck {
	// The sandbox first: every run needs it unless it opts out.
	checks := sandboxChecks(env.probe(ctx))
	// The model the user would run by default, to know which key is required.
	userConfig, defaultModel := userConfigChecks(env)
	checks = append(checks, userConfig...)
	defaultProvider, _ := modelspec.Parse(defaultModel)
	checks = append(checks, keyChecks(env, defaultModel)...)
	checks = append(checks, claudeCheck(ctx, env, defaultProvider == "claude-code"), cgroupCheck(), memoryCgroupCheck())
	return append(checks, toolChecks(ctx, env)...)
}

// sandboxChecks say whether this machine can sandbox, and what it has of
// namespaces and Landlock.
func sandboxChecks(caps sandbox.Capabilities) []doctorCheck {
	var checks []doctorCheck
	if err := agenterr.From(caps.Unavailable()); err != nil {
		checks = append(checks, doctorCheck{Name: "sandbox", Status: checkFail,
			Detail: "this machine cannot sandbox: " + caps.Missing() + "; every run stops with SANDBOX_UNAVAILABLE (exit 2) before it starts",
			Hint:   strings.TrimPrefix(err.Hint+"; ", "; ") + "or run unsandboxed on purpose (Bash, validators and subprocess steps then run with your rights): capstan run DIR --no-sandbox, or \"sandbox\": {\"enabled\": false} under runner.boundaries in agent.json"})
	}
	ns := doctorCheck{Name: "sandbox namespaces", Status: checkOK, Detail: "user, network, PID, mount, IPC and UTS namespaces available"}
	if !caps.Namespaces {
		ns.Status, ns.Detail, ns.Hint = checkWarn, "unavailable: "+caps.Reason, caps.Hint
		if ns.Hint == "" {
			ns.Hint = "run on Linux with unprivileged user namespaces"
		}
	}
	ll := doctorCheck{Name: "landlock", Status: checkOK, Detail: fmt.Sprintf("ABI %d", caps.LandlockABI)}
	if caps.LandlockABI == 0 {
		ll.Status, ll.Detail, ll.Hint = checkWarn, "unavailable", "a Linux kernel ≥ 5.13 with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot list"
	}
	return append(checks, ns, ll)
}

// userConfigChecks check the user config and the default model (from
// CAPSTAN_MODEL, else the user config's default_model), which they
// return.
func userConfigChecks(env doctorEnv) (checks []doctorCheck, defaultModel string) {
	defaultModel = env.getenv("CAPSTAN_MODEL")
	ucLine, ucWarnings, ucErr := describeUserConfig()
	switch {
	case ucErr != nil:
		checks = append(checks, doctorCheck{Name: "user config", Status: checkFail, Detail: ucErr.Error(), Hint: "fix or remove the file"})
	case len(ucWarnings) > 0:
		checks = append(checks, doctorCheck{Name: "user config", Status: checkWarn, Detail: ucLine + "; " + strings.Join(ucWarnings, "; "), Hint: "fix the keys named (the rest of the file is used)"})
	default:
		checks = append(checks, doctorCheck{Name: "user config", Status: checkOK, Detail: ucLine})
	}
	if ucErr == nil && defaultModel == "" {
		if uc, err := loadUserConfig(); err == nil {
			defaultModel = uc.DefaultModel
		}
	}
	if defaultModel == "" {
		return checks, ""
	}
	defaultProvider, _ := modelspec.Parse(defaultModel)
	c := doctorCheck{Name: "default model", Status: checkOK, Detail: defaultModel}
	if !slices.Contains(llm.Providers(), defaultProvider) {
		// Every run without --model would stop with UNKNOWN_PROVIDER.
		// (The user config's default_model is checked when it is read.)
		c.Status = checkFail
		c.Detail += fmt.Sprintf(" (from CAPSTAN_MODEL): unknown model provider %q", defaultProvider)
		c.Hint = "set CAPSTAN_MODEL to provider:model, with a provider among " + strings.Join(llm.Providers(), ", ")
	}
	return append(checks, c), defaultModel
}

// keyChecks say whether each provider's API key is set (a failure when
// the default model needs it) and check its base URL variable.
func keyChecks(env doctorEnv, defaultModel string) []doctorCheck {
	defaultProvider, _ := modelspec.Parse(defaultModel)
	var checks []doctorCheck
	for _, k := range []struct{ provider, vars, hint string }{
		{"anthropic", "ANTHROPIC_API_KEY", "export ANTHROPIC_API_KEY=... (from console.anthropic.com) to use anthropic:<model>"},
		{"openai", "OPENAI_API_KEY", "export OPENAI_API_KEY=... to use openai:<model> (a local OpenAI-compatible server may not need one)"},
	} {
		c := doctorCheck{Name: k.provider + " key", Hint: k.hint}
		if env.getenv(k.vars) != "" {
			c.Status, c.Detail = checkOK, k.vars+" is set"
		} else {
			c.Status, c.Detail = checkWarn, k.vars+" is not set"
			if defaultProvider == k.provider {
				c.Status = checkFail
				c.Detail += " (your default model " + defaultModel + " needs it)"
			}
		}
		if u := env.getenv(baseURLEnv[k.provider]); u != "" {
			c.Detail += "; " + baseURLEnv[k.provider] + "=" + llm.RedactedBaseURL(u)
			// A run refuses a base URL that carries a key (it would be
			// recorded): say so before a run does.
			if e := agenterr.From(llm.CheckBaseURL(baseURLEnv[k.provider], u)); e != nil {
				c.Status, c.Detail, c.Hint = checkFail, c.Detail+" ("+e.Message+")", e.Hint
			}
		}
		checks = append(checks, c)
	}
	return checks
}

// toolChecks say which of the programs runs use are on PATH: git (a
// failure without it), and the interpreters of skill scripts.
func toolChecks(ctx context.Context, env doctorEnv) []doctorCheck {
	var checks []doctorCheck
	if p, err := env.lookPath("git"); err == nil {
		checks = append(checks, doctorCheck{Name: "git", Status: checkOK, Detail: firstLine(commandOutput(ctx, p, "--version"), 120) + " (" + p + ")"})
	} else {
		checks = append(checks, doctorCheck{Name: "git", Status: checkFail, Detail: "not found on PATH (git validators, the pipeline and the examples need it)", Hint: "install git (Debian/Ubuntu: apt-get install git; macOS: xcode-select --install)"})
	}
	for _, in := range []struct{ name, pkg string }{{"python3", "python3"}, {"node", "nodejs"}, {"bash", "bash"}} {
		c := doctorCheck{Name: in.name}
		if p, err := env.lookPath(in.name); err == nil {
			c.Status, c.Detail = checkOK, firstLine(commandOutput(ctx, p, "--version"), 120)+" ("+p+")"
		} else {
			c.Status, c.Detail = checkWarn, "not found on PATH (skill scripts written in it cannot run)"
			c.Hint = "install " + in.pkg
		}
		checks = append(checks, c)
	}
	return checks
}

// claudeCheck finds the claude CLI (CAPSTAN_CLAUDE_PATH, else PATH) and
// its version; required only when the default model is claude-code.
func claudeCheck(ctx context.Context, env doctorEnv, required bool) doctorCheck {
	c := doctorCheck{Name: "claude CLI", Hint: "npm install -g @anthropic-ai/claude-code (needed only for claude-code models)"}
	path := env.getenv(claudecode.EnvBinary)
	if path == "" {
		p, err := env.lookPath("claude")
		if err != nil {
			c.Status, c.Detail = checkWarn, "not found on PATH"
			if required {
				c.Status = checkFail
			}
			return c
		}
		path = p
	}
	v := firstLine(commandOutput(ctx, path, "--version"), 120)
	if v == "" {
		c.Status, c.Detail = checkWarn, path+" did not report a version"
		if required {
			c.Status = checkFail
		}
		return c
	}
	c.Status, c.Detail = checkOK, v+" ("+path+")"
	return c
}

// cgroupCheck reports how the sandbox bounds the number of processes a
// script may start (sandbox.ProcessBound, which tries what a run does). It
// warns when only the watchdog stands between a fork bomb and the machine.
func cgroupCheck() doctorCheck {
	how, kernel := sandbox.ProcessBound()
	c := doctorCheck{Name: "process limit", Status: checkOK, Detail: how}
	if !kernel {
		c.Status = checkWarn
		c.Hint = "run capstan as a non-root user, or where it may create a pids cgroup (cgroup v2 with the pids controller delegated, or a writable /sys/fs/cgroup/pids)"
	}
	return c
}

// memoryCgroupCheck reports how the sandbox bounds the memory of a run's
// process tree (sandbox.MemoryBound, which tries what a run does). Without
// a memory cgroup it warns: RLIMIT_AS then applies per process, which the
// Go race detector and V8 cannot live with.
func memoryCgroupCheck() doctorCheck {
	how, cgroup := sandbox.MemoryBound()
	c := doctorCheck{Name: "memory limit", Status: checkOK, Detail: how}
	if !cgroup {
		c.Status = checkWarn
		c.Hint = "sandboxed validators' memory (4 GiB for the tree) is then bounded per process by RLIMIT_AS, under which go test -race and V8 may fail; " +
			"run capstan where it may create a memory cgroup (cgroup v2 with the memory controller delegated to its cgroup, or a writable /sys/fs/cgroup/memory), see docs/sandbox.md, \"Memory limit\""
	}
	return c
}

// commandOutput runs a short version query with a time limit.
func commandOutput(ctx context.Context, path string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
