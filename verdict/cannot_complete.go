// The honest way out: instead of being
// pushed by retry after retry toward gaming the checks, it can declare
// that the task cannot be done as specified, with its reason and evidence.
// The verdict stage ends the run on such a declaration with the completion
// reason cannot_complete (exit code 4 of `capstan run`), and the Result
// and `capstan show` carry the model's explanation.
//
// The declaration is text the model itself writes — a line starting with
// CANNOT_COMPLETE: — or a structured output whose status is
// "cannot_complete", so it works on every backend (the Claude Code CLI
// included) without a tool. Tool output does not count: only the model's
// own responses are read.

package verdict

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verify"
)

// Status is the structured output's status of a declaration
// ({"status": "cannot_complete", "reason": "…", "evidence": "…"}).
const CannotCompleteStatus = "cannot_complete"

// Bounds of a declaration kept in the Result.
const (
	maxReason   = 2000
	maxEvidence = 8000
)

// Find returns the declaration of an iteration, if the model made one.
// The structured output wins over text; of several textual declarations
// the last counts.
func FindCannotComplete(s *event.IterationSummary) (event.CannotComplete, bool) {
	if s == nil {
		return event.CannotComplete{}, false
	}
	if len(s.StructuredOutput) > 0 {
		var out struct {
			Status   string `json:"status"`
			Reason   string `json:"reason"`
			Evidence any    `json:"evidence"`
		}
		if json.Unmarshal(s.StructuredOutput, &out) == nil && strings.EqualFold(strings.TrimSpace(out.Status), CannotCompleteStatus) {
			return event.CannotComplete{Iteration: s.Iteration, Reason: clip(out.Reason, maxReason), Evidence: clip(evidenceText(out.Evidence), maxEvidence)}, true
		}
	}
	var d event.CannotComplete
	found := false
	for _, r := range s.AssistantResponses {
		lines := strings.Split(r, "\n")
		for i, l := range lines {
			rest, ok := strings.CutPrefix(strings.TrimLeft(l, " \t>*_`#-"), verify.CannotCompleteMarker)
			if !ok {
				continue
			}
			found = true
			d = event.CannotComplete{Iteration: s.Iteration, Reason: clip(strings.Trim(rest, " \t*_`"), maxReason),
				Evidence: clip(strings.Join(lines[i+1:], "\n"), maxEvidence)}
		}
	}
	return d, found
}

// RetryNote is what a retry prompt adds when the same failure repeats:
// the option to say so instead of gaming the check.
const RetryNote = "### If the task cannot be done as specified\n\n" +
	"This check has failed the same way before. If you are convinced the task cannot be done as specified " +
	"(for example, the tests contradict the specification), do not change the tests or work around the check. " +
	"Instead, end your answer with a line\n\n" +
	"    " + verify.CannotCompleteMarker + " <one-sentence reason>\n\n" +
	"followed by your evidence (the contradicting test, expectation and specification). The run then stops and " +
	"your explanation goes to the user.\n"

func evidenceText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, err := json.MarshalIndent(x, "", "  ")
		if err != nil {
			return ""
		}
		return string(b)
	}
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (cut)"
}
