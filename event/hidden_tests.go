package event

// Phases of a HiddenResult: the run that finds the hidden tests, and each
// verification that runs them again.
const (
	HiddenPhaseBaseline = "baseline"
	HiddenPhaseCheck    = "check"
)

// HiddenResult is one run of a test validator with the hidden files placed: the
// hidden tests (by name, never their contents or output) and their
// outcomes.
type HiddenResult struct {
	Validator string `json:"validator"`
	Phase     string `json:"phase"`
	// PerTest: the hidden tests are known one by one (the tests of this
	// run that did not run without the hidden files). When false only
	// whether the command passed is known, and Tests is empty.
	PerTest bool `json:"perTest"`
	// Passed says whether the validator's command passed (its successWhen).
	Passed bool       `json:"passed"`
	Tests  []TestCase `json:"tests,omitempty"`
}

// Failed are the hidden tests that did not pass.
func (r *HiddenResult) Failed() []string {
	var out []string
	for _, t := range r.Tests {
		if t.Outcome != TestPassed {
			out = append(out, t.Name)
		}
	}
	return out
}

// EventKind implements event.Payload: a HiddenResult is journaled as a
// tests.hidden event, at the start (Phase "baseline") and at each
// verification (Phase "check").
func (*HiddenResult) EventKind() Kind { return KindHiddenTests }
