package event

import (
	"strings"
	"time"
)

// TestBaseline is one test validator's run before the model's first
// iteration: the payload of the journal's tests.baseline event.
type TestBaseline struct {
	// Validator is the validator's name; Command the command it ran.
	Validator string `json:"validator"`
	Command   string `json:"command"`
	ExitCode  int    `json:"exitCode"`
	// Parsed says whether the output is a test run Parse reads; when it is
	// not, the validator's later runs are not compared.
	Parsed bool `json:"parsed"`
	// Truncated: the output exceeded the validator's output cap, so the
	// list of tests may be incomplete and only the zero-tests rule applies.
	Truncated bool `json:"truncated,omitempty"`
	// DurationMs is how long the run took (journals written before it
	// was recorded have 0).
	DurationMs int64   `json:"durationMs,omitempty"`
	Run        TestRun `json:"run"`
}

// TestLoss is what a run lost against its baseline.
type TestLoss struct {
	// Pattern is the failure pattern of the first rule broken, in this
	// order: PatternTestsNoneRun, PatternTestsDisappeared,
	// PatternTestsSkipped, PatternTestsCountDropped.
	Pattern string `json:"pattern"`
	// Disappeared are tests that ran in the baseline and are not in this
	// run; Skipped those that ran then and are skipped now.
	Disappeared []string `json:"disappeared,omitempty"`
	Skipped     []string `json:"skipped,omitempty"`
	// Unseen are tests that ran in the baseline and are not in what was
	// kept of a run whose output was cut at the output cap: whether they
	// still run is not known (PatternTestsOutputTruncated).
	Unseen []string `json:"unseen,omitempty"`
	// BaselineRan and Ran are the numbers of tests that ran (passed or
	// failed); -1 when not known (Ran of a run whose output was cut).
	BaselineRan int `json:"baselineRan"`
	Ran         int `json:"ran"`
	// ReportMissing: the baseline was read from the command's
	// machine-readable report and this run printed none, so none of the
	// baseline's tests is known to run (each is in Disappeared).
	ReportMissing bool `json:"reportMissing,omitempty"`
}

// EventKind implements Payload: a baseline is journaled as a
// tests.baseline event, once per test validator when the run starts.
func (*TestBaseline) EventKind() Kind { return KindTestBaseline }

// EventKind implements Payload: a comparison is journaled as a
// tests.compare event each time a test validator's run is compared with
// its baseline.
func (TestComparison) EventKind() Kind { return KindTestCompare }

// TestComparison is the payload of a tests.compare event.
type TestComparison struct {
	Validator string `json:"validator"`
	// Parsed is false when the run's output is no test run (no test ran).
	Parsed bool `json:"parsed"`
	// Counted says whether the counts are known (see Run.Counted).
	Counted bool `json:"counted"`
	Passed  int  `json:"passed"`
	Failed  int  `json:"failed"`
	Skipped int  `json:"skipped"`
	// Truncated: the run's output was cut at the output cap; the counts
	// are those of the kept start and end, at most the run's.
	Truncated bool `json:"truncated,omitempty"`
	// Loss is what the run lost; nil when it lost nothing.
	Loss *TestLoss `json:"loss,omitempty"`
}

// TestOutcome is what became of one test (verify.Passed, verify.Failed,
// verify.Skipped).
type TestOutcome string

// TestPassed is the outcome of a test that passed (verify.Passed).
const TestPassed TestOutcome = "passed"

// TestCase is one test of a TestRun.
type TestCase struct {
	// Name identifies the test across runs: "example.com/app.TestAdd/case"
	// (go), "tests/test_calc.py::test_add" (pytest), "tests.test_calc.T.test_add"
	// (unittest), "src/sum.test.js › sum › adds" (jest, vitest),
	// "tests::adds" (cargo).
	Name    string      `json:"name"`
	Outcome TestOutcome `json:"outcome"`
}

// TestRun is one test run as its output tells it.
type TestRun struct {
	// Runners are the test runners whose output was found ("go",
	// "pytest", "unittest", "jest", "vitest", "cargo").
	Runners []string `json:"runners"`
	// PerTest says whether every runner listed its tests one by one; when
	// false, Tests holds only those that were listed (often the failures)
	// and the counts come from the runners' summaries.
	PerTest bool `json:"perTest"`
	// Counted says whether the number of tests that ran is known (per test
	// or from a summary line). go test without -v tells only whether any
	// test ran at all.
	Counted bool `json:"counted"`
	// Passed, Failed and Skipped count the tests.
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// Tests are the listed tests, in order of their results. A test
	// reported more than once keeps its worst outcome (failed, then
	// skipped, then passed).
	Tests []TestCase `json:"tests,omitempty"`
	// Truncated: the output was longer than the validator's output cap and
	// only its start and its end were kept (set by ParseOutput). Tests
	// printed in the part left out are not listed, and the counts are of
	// the kept parts: at most the run's. For a run read from its report
	// (Source), it means that the report was longer than its own bound:
	// the tests it holds are listed.
	Truncated bool `json:"-"`
	// Source says where the run was read from: SourceReport (a
	// machine-readable report) or SourceOutput (the printed text).
	Source string `json:"source,omitempty"`
}

// Ran is the number of tests that ran (passed or failed).
func (r TestRun) Ran() int { return r.Passed + r.Failed }

// Outcomes maps each listed test to its outcome.
func (r TestRun) Outcomes() map[string]TestOutcome {
	m := make(map[string]TestOutcome, len(r.Tests))
	for _, t := range r.Tests {
		m[t.Name] = t.Outcome
	}
	return m
}

// EventKind implements Payload: a request is journaled by the run,
// as a testchange.requested event, when the model asks to change
// protected files.
func (*TestChangeRequest) EventKind() Kind { return KindTestChangeRequested }

// EventKind implements Payload: a decision is journaled, as a
// testchange.decided event, by whoever decided: capstan approve / capstan
// reject outside the run, or the run itself under the hiddenTests policy.
func (*TestChangeDecision) EventKind() Kind { return KindTestChangeDecided }

// RequestedFile is one protected file a request asks to change: its change
// against the baseline, and the content that becomes its baseline when the
// request is approved.
type RequestedFile struct {
	FileChange
	// File is the new state: its digest and (when small text) content.
	// Zero for a deleted file.
	File ProtectedFile `json:"file,omitzero"`
}

// TestChangeRequest is the payload of testchange.requested.
type TestChangeRequest struct {
	// Iteration is the iteration the request was made in.
	Iteration int `json:"iteration"`
	// Reason is the model's reason for each file, joined ("; ").
	Reason string `json:"reason"`
	// Files are the files the request names, with their diffs.
	Files []RequestedFile `json:"files"`
	// Unrequested are other protected files that differ from the baseline
	// ("modified: x"): not part of the request, never approved by it.
	Unrequested []string `json:"unrequested,omitempty"`
}

// Paths are the requested files' paths.
func (r *TestChangeRequest) Paths() []string {
	out := make([]string, len(r.Files))
	for i, f := range r.Files {
		out[i] = f.Path
	}
	return out
}

// Diff is the requested changes as one text, file by file.
func (r *TestChangeRequest) Diff() string {
	var b strings.Builder
	for _, f := range r.Files {
		b.WriteString("--- " + f.Path + " (" + f.Kind + ")\n")
		if f.Diff != "" {
			b.WriteString(f.Diff + "\n")
		} else {
			b.WriteString("(binary or too large to show)\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// TestChangeDecision is the payload of testchange.decided.
type TestChangeDecision struct {
	// Iteration is the request's iteration.
	Iteration int `json:"iteration"`
	// Decision is verify.TestChangeApproved or verify.TestChangeRejected.
	Decision string `json:"decision"`
	// By says who decided: a user name for capstan approve/reject,
	// "hidden tests" for the hiddenTests policy.
	By string `json:"by"`
	// At is when a human decided (zero for the hidden tests' decision,
	// made during the run; the journal event has the time).
	At time.Time `json:"at,omitzero"`
	// Reason is why (a rejection's --reason, the hidden tests' verdict).
	Reason string `json:"reason,omitempty"`
	// Files are the files decided on (the request's, with their diffs).
	Files []RequestedFile `json:"files"`
}

// ProtectedFile is one protected file of a protect.baseline (ProtectBaseline).
type ProtectedFile struct {
	// Digest is "sha256:" and the hex digest of the content.
	Digest string `json:"digest"`
	// Content is the file's text when it is valid UTF-8 and small enough
	// (see MaxContentBytes); "" otherwise.
	Content string `json:"content,omitempty"`
	// HasContent says whether Content was kept (an empty file keeps "").
	HasContent bool `json:"hasContent,omitempty"`
}

// FileChange is one protected file that differs from the baseline.
type FileChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Diff is a line diff (baseline → now) when both texts are known.
	Diff string `json:"diff,omitempty"`
}

// String is "modified: calc_test.go".
func (c FileChange) String() string { return c.Kind + ": " + c.Path }

// ProtectBaseline is the state of the protected files (their protect
// globs) when a run started or a step was entered: the payload of a
// protect.baseline event.
type ProtectBaseline struct {
	// Step is the step whose protect globs these are, taken when the step
	// was entered; "" for runner.verification.protect, taken when the run
	// started.
	Step string `json:"step,omitempty"`
	// Globs are the protect globs the baseline was taken with.
	Globs []string `json:"globs"`
	// Files maps a "/"-separated path relative to the work dir to the file.
	Files map[string]ProtectedFile `json:"files"`
}

// EventKind implements Payload: a baseline is journaled as a
// protect.baseline event (the run's when it starts, a step's when the
// step is entered).
func (*ProtectBaseline) EventKind() Kind { return KindProtectBaseline }
