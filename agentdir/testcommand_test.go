package agentdir

import (
	"testing"
)

func TestVerboseTestCommand(t *testing.T) {
	for cmd, want := range map[string]string{
		"go test ./...":                     "go test -v ./...",
		"go test -race ./...":               "go test -v -race ./...",
		"go test -v ./...":                  "",
		"go test -json ./...":               "",
		"go test -vet=off ./...":            "go test -v -vet=off ./...",
		"python3 -m pytest -q":              "python3 -m pytest -v",
		"python3 -m pytest -q tests/":       "python3 -m pytest -v tests/",
		"pytest -v":                         "",
		"python -m unittest discover":       "python -m unittest -v discover",
		"npx jest":                          "npx jest --verbose",
		"npx vitest run":                    "npx vitest run --reporter=verbose",
		"npx vitest run --reporter=verbose": "",
		"cargo test":                        "",
		"make test":                         "",
	} {
		if got, _ := VerboseTestCommand(cmd); got != want {
			t.Errorf("%q: %q, want %q", cmd, got, want)
		}
	}
}

// With runner.verification.testBaseline false nothing compares the test
// runs, so a test command without per-test output is no problem.
func TestTestBaselineOffSilencesNotVerbose(t *testing.T) {
	a, r := baseAgent(), baseRegistry()
	at(r, "validators", "tests-pass")["command"] = "go test ./..."
	at(a, "runner", "verification")["testBaseline"] = false
	if res := Check(writeAgent(t, a, r, nil), testOpts); len(res.Problems()) != 0 {
		t.Fatalf("problems:\n%s", dump(res))
	}
}
