package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/verify"
)

// ReasonCleanRunDiffers: the clean run of the test validators after the
// model's last turn did not confirm the verification that completed it.
const ReasonCleanRunDiffers = "clean_run_differs"

// cleanRun runs each test validator of vr, the verification that
// completed the run, once more in a clean environment: a new process
// with a fresh temporary directory, fresh build caches (the Go standard
// library seeded) and fresh copies of the pinned toolchain configuration,
// so no state an earlier validator run left behind (a cached test
// result, a planted temp file, a rewritten config copy) takes part. It
// returns the coded error that fails the run when a result differs, and
// an error of its own when it could not run.
func (a *Agent) cleanRun(ctx context.Context, vr *event.ValidationResult) (failed, err error) {
	if vr == nil || !a.spec.Runner.Verification.CleanRunOn() {
		return nil, nil
	}
	tests := map[string]bool{}
	for _, c := range a.testConditions() {
		tests[c.Validator] = true
	}
	var differs []string
	for _, run := range vr.Runs {
		if !tests[run.Validator] {
			continue
		}
		ev, err := a.cleanRunOne(ctx, run)
		if err != nil {
			return nil, err
		}
		a.emit.Emit(&ev)
		if len(ev.Differences) > 0 {
			differs = append(differs, fmt.Sprintf("%s (%s): %s", ev.Validator, ev.Command, strings.Join(ev.Differences, "; ")))
		}
	}
	if len(differs) == 0 {
		return nil, nil
	}
	e := agenterr.New(agenterr.CodeCleanRunDiffers, agenterr.LayerCompletion, false,
		"the verification passed, but the test validators run again in a clean environment (a new process, fresh temporary and cache directories, the toolchain configuration pinned at the start) do not confirm it: %s",
		strings.Join(differs, " | "))
	e.Hint = "the result depended on state outside the work dir that the run's own commands left or changed (a build or test cache, a temporary file, the toolchain configuration); " +
		"see capstan show for the two runs, and run the test command yourself in a fresh shell"
	return e, nil
}

// maxCleanDifferences bounds the tests a CleanRunEvent names.
const maxCleanDifferences = 20

// cleanRunOne runs one test validator in the clean environment and
// compares it with run, its run in the verification.
func (a *Agent) cleanRunOne(ctx context.Context, run event.ValidatorRun) (event.CleanRunEvent, error) {
	// What the verification saw, read before the clean run writes the
	// validator's report file anew.
	before, parsedBefore := verify.ParseTestRunOutput(run.Output, a.workDir)
	hiddenNames := map[string]bool{}
	if g := a.hiddenCheck; g != nil && g.Baselines[run.Validator] != nil {
		for _, t := range g.Baselines[run.Validator].Tests {
			hiddenNames[t.Name] = true
		}
	}
	env, cleanup, err := a.cleanEnv(ctx)
	if err != nil {
		return event.CleanRunEvent{}, err
	}
	defer cleanup()
	cond := conditionOf(a, run.Validator)
	start := time.Now()
	again, err := a.rt.verifier.RunCommandValidatorIn(ctx, cond, env)
	if err != nil {
		return event.CleanRunEvent{}, err
	}
	ev := event.CleanRunEvent{Validator: run.Validator, Command: again.Command, Passed: again.Passed, DurationMs: time.Since(start).Milliseconds()}
	if !again.Passed {
		ev.Differences = append(ev.Differences, fmt.Sprintf("the command passed in the verification and fails here (exit %d)", again.Output.ExitCode))
		ev.Output, _ = verify.OutputExcerpt(again.Output)
	}
	after, parsedAfter := verify.ParseTestRunOutput(again.Output, a.workDir)
	if !parsedBefore || !parsedAfter || !before.PerTest || !after.PerTest {
		return ev, nil
	}
	outcomes := after.Outcomes()
	var lost []string
	for _, t := range before.Tests {
		if t.Outcome != verify.Passed || hiddenNames[t.Name] {
			continue
		}
		switch o, ok := outcomes[t.Name]; {
		case !ok:
			lost = append(lost, t.Name+" did not run")
		case o != verify.Passed:
			lost = append(lost, fmt.Sprintf("%s %s", t.Name, o))
		}
	}
	slices.Sort(lost)
	if len(lost) > maxCleanDifferences {
		lost = append(lost[:maxCleanDifferences], fmt.Sprintf("and %d more", len(lost)-maxCleanDifferences))
	}
	if len(lost) > 0 {
		ev.Differences = append(ev.Differences, "passed in the verification, not here: "+strings.Join(lost, ", "))
		ev.Output, _ = verify.OutputExcerpt(again.Output)
	}
	return ev, nil
}

// cleanEnv is the environment of a clean run. A sandboxed validator
// already runs in a new process with a private HOME and TMPDIR and a
// fresh copy of the build cache the baseline filled, so it gets nothing
// more. An unconfined one gets a fresh TMPDIR, fresh build caches
// (GOCACHE seeded with the Go standard library in a Go module,
// XDG_CACHE_HOME, npm_config_cache) and fresh copies of the toolchain
// configuration pinned at the start. cleanup removes them.
func (a *Agent) cleanEnv(ctx context.Context) (verify.CommandEnv, func(), error) {
	if a.sandbox != nil {
		return verify.CommandEnv{}, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "capstan-clean-")
	if err != nil {
		return verify.CommandEnv{}, nil, fmt.Errorf("clean run: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	fail := func(err error) (verify.CommandEnv, func(), error) {
		cleanup()
		return verify.CommandEnv{}, nil, err
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fail(fmt.Errorf("clean run: %w", err))
	}
	cache, err := sandbox.NewCache(dir)
	if err != nil {
		return fail(err)
	}
	cleanup = func() {
		_ = cache.Remove() // it makes some entries read-only
		_ = os.RemoveAll(dir)
	}
	if isGoModule(a.workDir) {
		if seed, err := a.goStdlibSeed(ctx, a.workDir); err == nil && seed != "" {
			_ = cache.Seed(seed) // without the seed the run compiles the standard library: slower, as clean
		}
	}
	env := verify.CommandEnv{Env: append(cache.Env(), "TMPDIR="+tmp)}
	if a.toolconf != nil {
		fresh, err := a.toolconf.Fresh(dir)
		if err != nil {
			return fail(err)
		}
		env.Pins = fresh
	}
	return env, cleanup, nil
}

// conditionOf is the completion condition of test validator name (its
// params as the verification ran it).
func conditionOf(a *Agent, name string) (c agentdir.CompletionCondition) {
	for _, tc := range a.testConditions() {
		if tc.Validator == name {
			return tc
		}
	}
	c.Validator = name
	return c
}
