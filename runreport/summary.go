package runreport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/event"
)

// Summary is one line: "tests-pass (command) passed in 464ms".
func (v ValidatorResult) Summary() string {
	s := v.Name
	if v.Type != "" {
		s += " (" + v.Type + ")"
	}
	if v.Valid {
		s += " passed"
	} else {
		s += " failed"
		if v.Pattern != "" {
			s += ": pattern " + v.Pattern
		}
	}
	if v.ExitCode != nil {
		s += fmt.Sprintf(", exit %d", *v.ExitCode)
	}
	if v.Duration > 0 {
		s += " in " + FormatDuration(v.Duration)
	}
	return s
}

// BaselineSummary is one line: "tests-pass (go test -v ./...) before the
// first iteration: 2 ran (0 passed, 2 failed), 0 skipped, exit 1".
func BaselineSummary(b event.TestBaseline) string {
	s := fmt.Sprintf("%s (%s) before the first iteration: ", b.Validator, b.Command)
	switch {
	case !b.Parsed:
		return s + fmt.Sprintf("no test run capstan reads in its output, exit %d%s; lost tests not checked", b.ExitCode, baselineTime(b))
	case !b.Run.Counted:
		s += "tests ran, not counted (no per-test output)"
	default:
		s += fmt.Sprintf("%d ran (%d passed, %d failed), %d skipped", b.Run.Ran(), b.Run.Passed, b.Run.Failed, b.Run.Skipped)
	}
	return s + fmt.Sprintf(", exit %d%s", b.ExitCode, baselineTime(b))
}

// baselineTime is " in 19.7s", or "" for a baseline journaled without
// its duration.
func baselineTime(b event.TestBaseline) string {
	if b.DurationMs <= 0 {
		return ""
	}
	return " in " + FormatDuration(time.Duration(b.DurationMs)*time.Millisecond)
}

// CompareSummary is one line: "no lost tests in tests-pass: 2 ran (1
// passed, 1 failed), 0 skipped" or "… lost: pattern tests-disappeared".
func CompareSummary(c event.TestComparison) string {
	s := fmt.Sprintf("no lost tests in %s: ", c.Validator)
	switch {
	case !c.Parsed:
		s += "no test run in its output"
	case !c.Counted:
		s += "tests ran, not counted (no per-test output)"
	default:
		s += fmt.Sprintf("%d ran (%d passed, %d failed), %d skipped", c.Passed+c.Failed, c.Passed, c.Failed, c.Skipped)
	}
	if c.Loss != nil {
		s += "; lost: pattern " + c.Loss.Pattern
		if c.Loss.BaselineRan >= 0 {
			s += fmt.Sprintf(" (%d ran before the first iteration)", c.Loss.BaselineRan)
		}
	}
	return s
}

// HiddenSummary is one line: "hidden tests in tests-pass: 2 of 2 passed"
// (a check) or "hidden tests of tests-pass before the first iteration: 2
// (0 passed, 2 failed)" (the baseline). It names no test and shows no
// content.
func HiddenSummary(h event.HiddenResult) string {
	failed := len(h.Failed())
	if h.Phase == event.HiddenPhaseBaseline {
		s := fmt.Sprintf("hidden tests of %s before the first iteration: ", h.Validator)
		if !h.PerTest {
			return s + fmt.Sprintf("not listed one by one (the command %s with them)", passWord(h.Passed))
		}
		return s + fmt.Sprintf("%d (%d passed, %d failed)", len(h.Tests), len(h.Tests)-failed, failed)
	}
	if !h.PerTest {
		return fmt.Sprintf("hidden tests in %s: not listed one by one; the command %s with them", h.Validator, passWord(h.Passed))
	}
	s := fmt.Sprintf("hidden tests in %s: %d of %d passed", h.Validator, len(h.Tests)-failed, len(h.Tests))
	if failed == 0 && !h.Passed {
		s += "; the command failed with them"
	}
	return s
}

func passWord(ok bool) string {
	if ok {
		return "passed"
	}
	return "failed"
}

// hiddenDetail lists each hidden test and its outcome, by name.
func hiddenDetail(h event.HiddenResult) string {
	var b strings.Builder
	for _, t := range h.Tests {
		fmt.Fprintf(&b, "%s: %s\n", t.Outcome, t.Name)
	}
	return strings.TrimRight(b.String(), "\n")
}

func compareDetail(c event.TestComparison) string {
	if c.Loss == nil {
		return ""
	}
	var b strings.Builder
	for _, t := range c.Loss.Disappeared {
		b.WriteString("disappeared: " + t + "\n")
	}
	for _, t := range c.Loss.Skipped {
		b.WriteString("skipped now: " + t + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// Summary is one line: "retry 1/4 for pattern test-failed (tests-pass)".
func (r Retry) Summary() string {
	s := "retry prompt"
	if r.Attempt > 0 {
		s += fmt.Sprintf(" %d/%d", r.Attempt, r.MaxAttempts)
	}
	if r.Pattern != "" {
		s += " for pattern " + r.Pattern
	}
	if r.Validator != "" {
		s += " (" + r.Validator + ")"
	}
	if r.Source != "" {
		s += " from " + r.Source
	}
	return s
}

// FormatDuration renders 0.4ms, 464ms, 1.6s, 2m05s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// UsageKeys returns the usage fields of u in a stable order: input and
// output first, then the rest by name.
func UsageKeys(u map[string]int64) []string {
	var keys []string
	for _, k := range []string{"input_tokens", "output_tokens"} {
		if _, ok := u[k]; ok {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range u {
		if k != "input_tokens" && k != "output_tokens" {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(keys, rest...)
}
