package verify

import (
	"sort"

	"github.com/capstan-dev/capstan/agentdir"
)

// Built-in failure pattern names. They are usable in a
// validator's failurePattern without declaring them in completionPatterns;
// a registry pattern of the same name overrides the built-in.
const (
	PatternGitDirty      = "git-dirty"
	PatternTestFailed    = "test-failed"
	PatternTypeError     = "type-error"
	PatternLintError     = "lint-error"
	PatternFormatError   = "format-error"
	PatternFileNotExists = "file-not-exists"
	// PatternProtectedChanged fails verification while a protected file
	// (runner.verification.protect) differs from the run's start.
	PatternProtectedChanged = "protected-changed"
	// The no-lost-tests rules: a test validator's run compared with its
	// run before the first iteration (package testrun).
	PatternTestsNoneRun      = "tests-none-run"      // the run executed no test
	PatternTestsDisappeared  = "tests-disappeared"   // a test that ran is gone
	PatternTestsSkipped      = "tests-skipped"       // a test that ran is skipped now
	PatternTestsCountDropped = "tests-count-dropped" // fewer tests ran
	// PatternTestsOutputTruncated: the run's output was longer than the
	// validator's output cap, and what was kept does not show that the
	// tests of the baseline still ran (it shows neither that they did nor
	// that they did not).
	PatternTestsOutputTruncated = "tests-output-truncated"
	// PatternHiddenTestsFailed: with the hidden test files placed
	// (runner.verification.hidden), a hidden test did not run or pass.
	PatternHiddenTestsFailed = "hidden-tests-failed"
)

// BuiltinPatterns returns the built-in failure patterns, each with
// edition "failed", adaptation = its name, and the params its retry prompt
// uses. The map is a fresh copy.
func BuiltinPatterns() map[string]agentdir.CompletionPattern {
	p := func(desc string, params ...string) agentdir.CompletionPattern {
		return agentdir.CompletionPattern{Description: desc, Edition: "failed", Params: params}
	}
	m := map[string]agentdir.CompletionPattern{
		PatternGitDirty:      p("uncommitted changes in the work tree", "changedFiles", "untrackedFiles"),
		PatternTestFailed:    p("tests fail", "failedTests", "errorOutput"),
		PatternTypeError:     p("type check fails", "typeErrors", "errorOutput"),
		PatternLintError:     p("linter reports problems", "lintErrors", "errorOutput"),
		PatternFormatError:   p("files are not formatted", "unformattedFiles", "errorOutput"),
		PatternFileNotExists: p("a required file is missing or invalid", "path", "error"),
		PatternProtectedChanged: p("protected files (tests and what configures them) were changed, deleted or added",
			"protectedFiles", "diff", "restore"),
		PatternTestsNoneRun: p("the test command ran no test at all (before the first iteration it ran some)",
			"testCommand", "baselineCount", "currentCount", "restore"),
		PatternTestsDisappeared: p("tests that ran before the first iteration no longer run",
			"disappearedTests", "testCommand", "baselineCount", "currentCount", "restore"),
		PatternTestsSkipped: p("tests that ran before the first iteration are skipped now",
			"skippedTests", "testCommand", "baselineCount", "currentCount", "restore"),
		PatternTestsCountDropped: p("fewer tests run than before the first iteration",
			"testCommand", "baselineCount", "currentCount", "restore"),
		PatternTestsOutputTruncated: p("the test output was longer than the output cap and what was kept does not show that the tests still run",
			"unseenTests", "testCommand", "baselineCount", "currentCount", "restore"),
		PatternHiddenTestsFailed: p("tests kept from the model (hidden tests) do not pass",
			"hiddenFailed", "hiddenTotal", "restore"),
	}
	for name, v := range m {
		v.Adaptation = name
		m[name] = v
	}
	return m
}

// LookupPattern finds a failure pattern: the registry's first, then the
// built-ins.
func LookupPattern(registry map[string]agentdir.CompletionPattern, name string) (agentdir.CompletionPattern, bool) {
	if p, ok := registry[name]; ok {
		return p, true
	}
	p, ok := BuiltinPatterns()[name]
	return p, ok
}

// BuiltinPatternNames lists the built-in failure pattern names, sorted.
func BuiltinPatternNames() []string {
	var n []string
	for k := range BuiltinPatterns() {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
