package agentdir

import (
	"regexp"

	"github.com/capstan-dev/capstan/internal/lazyre"
)

// RunsTests reports whether a validator command runs a test runner (go
// test, pytest, unittest, jest, vitest, cargo test, npm test, …).
func RunsTests(command string) bool { return testRunnerRE().MatchString(command) }

// verboseFlags are, per test runner that capstan reads, the pattern that
// finds it in a command, the flags that make it list each test, and the
// flag to add.
var verboseFlags = []struct {
	runner string
	find   func() *regexp.Regexp
	has    func() *regexp.Regexp
	add    string
}{
	{"go test", lazyre.New(`\bgo test\b`), lazyre.New(`(^|\s)-(test\.)?(v|json)(=true)?(\s|$)`), " -v"},
	{"pytest", lazyre.New(`\bpytest\b`), lazyre.New(`(^|\s)(-v+|--verbose)(\s|$)`), " -v"},
	{"unittest", lazyre.New(`\bunittest\b`), lazyre.New(`(^|\s)(-v|--verbose)(\s|$)`), " -v"},
	{"jest", lazyre.New(`\bjest\b`), lazyre.New(`(^|\s)--verbose(=true)?(\s|$)`), " --verbose"},
	{"vitest", lazyre.New(`\bvitest( run)?\b`), lazyre.New(`--reporter[= ]verbose\b`), " --reporter=verbose"},
}

// VerboseTestCommand returns command with the flag that makes its test
// runner list each test (go test -v, pytest -v, python -m unittest -v,
// jest --verbose, vitest --reporter=verbose), and the runner's name; ""
// when command runs none of them or already lists each test.
func VerboseTestCommand(command string) (fixed, runner string) {
	for _, f := range verboseFlags {
		loc := f.find().FindStringIndex(command)
		if loc == nil {
			continue
		}
		rest := command[loc[1]:]
		quiet := f.runner == "pytest" && pytestQuiet().MatchString(rest)
		if f.has().MatchString(rest) && !quiet {
			return "", ""
		}
		if quiet { // -q takes back a -v
			rest = pytestQuiet().ReplaceAllString(rest, "$1")
		}
		return command[:loc[1]] + f.add + rest, f.runner
	}
	return "", ""
}

// knownWithout says what the no-lost-tests check still knows of a runner
// that does not list each test.
func knownWithout(runner string) string {
	if runner == "go test" {
		return "only whether any test ran"
	}
	return "only whether fewer or no tests ran"
}

// pytestQuiet finds pytest's -q, which cancels a -v.
var pytestQuiet = lazyre.New(`\s-q+(\s|$)`)
