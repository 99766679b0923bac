package testfix

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/verify"
)

// Names of what Config builds.
const (
	// AgentName is the agent's name (agent.json "name").
	AgentName = "fix"
	// StepID is the one step: fix, then declare completion.
	StepID = "complete.fix"
	// TestsCheck is the name of the check that runs the test command; a
	// Check of this name replaces the detected one.
	TestsCheck = "tests"
	// PatternCheckFailed is the failure pattern of a check that is not
	// the test command.
	PatternCheckFailed = "check-failed"
)

// Check is a command that must succeed (exit 0) for a fix to count.
type Check struct {
	// Name names the check; TestsCheck replaces the ecosystem's test
	// command (and is read as test output: failed tests are named, and no
	// test may disappear), any other name adds a check.
	Name    string
	Command string
}

// ParseCheck reads the value of a --check flag: "NAME=COMMAND" when it
// starts with a lower-case name (letters, digits, dashes) and "=", else a
// COMMAND added as check-N (n is its place among the added checks).
//
// A check whose command passes whatever the work dir holds (X=1, true,
// "go test || true": verify.WhyCannotFail) is refused: it would let any
// fix count.
func ParseCheck(s string, n int) (Check, error) {
	c := Check{Name: fmt.Sprintf("check-%d", n), Command: s}
	if m := checkName.FindStringSubmatch(s); m != nil {
		if strings.TrimSpace(m[2]) == "" {
			return Check{}, fmt.Errorf("--check %q names check %s without a command (use NAME=COMMAND)", s, m[1])
		}
		c = Check{Name: m[1], Command: m[2]}
	}
	if strings.TrimSpace(s) == "" {
		return Check{}, fmt.Errorf("--check needs a command (COMMAND, or NAME=COMMAND; %s=COMMAND replaces the test command)", TestsCheck)
	}
	if why := verify.WhyCannotFail(c.Command); why != "" {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"--check %q always passes, so any fix would count: %s", s, why)
		e.Hint = "give a command that exits non-zero while the work is not done, e.g. --check 'go vet ./...' " +
			"or, named (a lower-case name), --check 'vet=go vet ./...'; " +
			"to set a variable for a check, put it before the command: --check 'GOFLAGS=-mod=mod go vet ./...'"
		return Check{}, e
	}
	return c, nil
}

var checkName = regexp.MustCompile(`^([a-z][a-z0-9-]*)=(.*)$`)

// Options are what Config builds the agent from.
type Options struct {
	// Task is what the model is asked to do ("make the failing tests pass").
	Task string
	// Ecosystem is the work dir's (from Detect); nil when none was found,
	// then Checks must name the test command (TestsCheck) or other checks.
	Ecosystem *Ecosystem
	// Checks add checks, or replace the test command (TestsCheck).
	Checks []Check
	// Model is runner.model ("" = the caller's default).
	Model string
	// Script is the file of a script model (Model "script:<file>"), put
	// into the agent's files under that name.
	Script []byte
}

// Config returns the agent as Go values: Definition, Registry, Prompts
// and Files of an agent.Config (the caller adds the work dir, model and
// events). Pass it to agent.New, or to WriteFolder for the equivalent
// agent folder.
func Config(o Options) (agent.Config, error) {
	if strings.TrimSpace(o.Task) == "" {
		return agent.Config{}, fmt.Errorf("the task is empty: say what to do, e.g. capstan fix \"make the failing tests pass\"")
	}
	checks, err := checksOf(o)
	if err != nil {
		return agent.Config{}, err
	}
	lang := "this project"
	var protect, bash []string
	if e := o.Ecosystem; e != nil {
		lang = "this " + e.Language + " project"
		protect, bash = e.Protect, e.Bash
	}
	validators, conditions, testCommand := checkValidators(checks)
	def := &agentdir.Definition{
		Version: "1.0.0", Name: AgentName, DisplayName: "Fix",
		Description: "Does a task in " + lang + " and commits; done only when its checks pass, no test was lost and git is clean.",
		Parameters: map[string]agentdir.Parameter{
			"task": {Type: "string", Description: "what to do", Default: mustJSON(o.Task)},
		},
		Runner: agentdir.Runner{
			Model:            o.Model,
			SystemPromptPath: "prompts/system.md",
			Completion:       agentdir.Completion{Type: "structured"},
			Boundaries: agentdir.Boundaries{
				AllowedTools: allowedTools(checks, bash), PermissionMode: "acceptEdits", MaxTurns: 30,
				// Sandboxed: the default.
			},
			Budgets:      agentdir.Budgets{MaxIterations: 8, TimeoutSeconds: 1800},
			Verification: agentdir.Verification{Protect: protect},
		},
	}
	reg := &agentdir.Registry{
		AgentID: AgentName, Version: "1.0.0", C1: "steps", EntryStep: StepID,
		Validators: validators,
		Steps: map[string]agentdir.Step{
			StepID: {
				StepID: StepID, Name: "Do the task and commit", C2: "retry", C3: "fix",
				UVVariables:          []string{"task"},
				OutputSchemaRef:      &agentdir.SchemaRef{File: "fix.schema.json", Schema: StepID},
				CompletionConditions: conditions,
				OnFailure:            &agentdir.OnFailure{Action: "retry", MaxAttempts: 6},
			},
		},
	}
	files := fstest.MapFS{
		"schemas/fix.schema.json": {Data: []byte(declarationSchema)},
		// The retry prompt of a failure pattern without its own.
		"prompts/steps/retry/fix/f_failed.md": {Data: []byte(genericRetry)},
	}
	if len(o.Script) > 0 {
		if file, ok := scriptFile(o.Model); ok {
			files[file] = &fstest.MapFile{Data: o.Script}
		}
	}
	if slices.ContainsFunc(checks, func(c Check) bool { return c.Name != TestsCheck }) {
		reg.CompletionPatterns = map[string]agentdir.CompletionPattern{
			PatternCheckFailed: {Description: "a check command fails", Edition: "failed", Adaptation: PatternCheckFailed, Params: []string{"errorOutput"}},
		}
	}
	var run []string
	for _, c := range checks {
		run = append(run, "`"+c.Command+"`")
	}
	return agent.Config{
		Definition: def, Registry: reg, Files: files,
		Prompts: agent.Prompts{
			System:  strings.ReplaceAll(systemPrompt, "LANG", lang),
			Steps:   map[string]string{StepID: strings.ReplaceAll(stepPrompt, "CHECKS", strings.Join(run, ", "))},
			Retries: retryPrompts(checks, testCommand),
		},
	}, nil
}

// checkValidators are the fix agent's validators — one per check (the
// tests' named tests-pass), then git-clean — and the completion
// conditions that run them in that order; testCommand is the tests'
// command ("" without a tests check).
func checkValidators(checks []Check) (validators map[string]agentdir.Validator, conditions []agentdir.CompletionCondition, testCommand string) {
	validators = map[string]agentdir.Validator{
		"git-clean": {Type: "command", Command: "git status --porcelain", SuccessWhen: "empty", FailurePattern: verify.PatternGitDirty,
			ExtractParams: map[string]string{"changedFiles": "parseChangedFiles", "untrackedFiles": "parseUntrackedFiles"}},
	}
	for _, c := range checks {
		v := agentdir.Validator{Type: "command", Command: c.Command, SuccessWhen: "exitCode:0", TimeoutSeconds: 600}
		name := c.Name
		if c.Name == TestsCheck {
			name, testCommand = "tests-pass", c.Command
			v.FailurePattern = verify.PatternTestFailed
			v.ExtractParams = map[string]string{"failedTests": "parseTestOutput", "errorOutput": "output"}
		} else {
			v.FailurePattern = PatternCheckFailed
			v.ExtractParams = map[string]string{"errorOutput": "output"}
		}
		validators[name] = v
		conditions = append(conditions, agentdir.CompletionCondition{Validator: name})
	}
	conditions = append(conditions, agentdir.CompletionCondition{Validator: "git-clean"})
	return validators, conditions, testCommand
}

// allowedTools are the fix agent's tools: the file tools, Bash for the
// ecosystem's commands (bash) and the checks' own, and the git commands
// it commits with.
func allowedTools(checks []Check, bash []string) []string {
	bash = slices.Clone(bash) // the caller's (an Ecosystem's) stays as it is
	for _, c := range checks {
		bash = append(bash, c.Command)
	}
	allowed := []string{"Read", "Edit", "Write", "Glob", "Grep"}
	for _, b := range dedupe(bash) {
		allowed = append(allowed, "Bash("+b+":*)")
	}
	return append(allowed, "Bash(git status:*)", "Bash(git diff:*)", "Bash(git add:*)", "Bash(git commit:*)", "Bash(git log:*)")
}

// retryPrompts are the fix agent's retry prompts: git dirty, protected
// files changed, a failed check when there are checks other than the
// tests, and failed or lost tests when it runs the tests (testCommand).
func retryPrompts(checks []Check, testCommand string) map[agent.RetryPrompt]string {
	retries := map[agent.RetryPrompt]string{
		{Step: StepID, Pattern: verify.PatternGitDirty}:         gitDirtyRetry,
		{Step: StepID, Pattern: verify.PatternProtectedChanged}: protectedRetry,
	}
	if slices.ContainsFunc(checks, func(c Check) bool { return c.Name != TestsCheck }) {
		retries[agent.RetryPrompt{Step: StepID, Pattern: PatternCheckFailed}] = checkFailedRetry
	}
	if testCommand != "" {
		retries[agent.RetryPrompt{Step: StepID, Pattern: verify.PatternTestFailed}] = strings.ReplaceAll(testFailedRetry, "TEST_COMMAND", testCommand)
		for _, p := range []string{verify.PatternTestsNoneRun, verify.PatternTestsDisappeared, verify.PatternTestsSkipped,
			verify.PatternTestsCountDropped, verify.PatternTestsOutputTruncated} {
			retries[agent.RetryPrompt{Step: StepID, Pattern: p}] = lostTestsRetry
		}
	}
	return retries
}

// checksOf is the ecosystem's test command with o.Checks applied.
func checksOf(o Options) ([]Check, error) {
	var checks []Check
	if o.Ecosystem != nil && o.Ecosystem.TestCommand != "" {
		checks = append(checks, Check{Name: TestsCheck, Command: o.Ecosystem.TestCommand})
	}
	for _, c := range o.Checks {
		if i := slices.IndexFunc(checks, func(have Check) bool { return have.Name == c.Name }); i >= 0 {
			checks[i] = c
			continue
		}
		checks = append(checks, c)
	}
	if len(checks) == 0 {
		return nil, fmt.Errorf("no test command: %w; pass the command that runs the tests, one line per test, with --check '%s=COMMAND'", ErrNoEcosystem, TestsCheck)
	}
	return checks, nil
}

// scriptFile is the file of a "script:<file>" model.
func scriptFile(model string) (string, bool) {
	file, ok := strings.CutPrefix(model, "script:")
	if !ok {
		return "", false
	}
	if file == "" {
		file = "script.yaml"
	}
	return path.Clean(file), true
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a string always marshals
	}
	return b
}
