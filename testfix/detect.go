// Package testfix builds the agent of `capstan fix`: a verified run that
// makes a repository's failing tests pass, with no agent folder. It reads
// the repository's ecosystem (a Go module, a Python project with pytest or
// unittest, a JavaScript package with jest or vitest, a Rust crate) and
// builds, as Go values, the agent the fix-failing-test example defines as
// files: the ecosystem's test command with one line per test, the test
// files protected from the model, a clean git tree, no lost tests, and a
// retry prompt for each way a declared fix can fail.
package testfix

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Ecosystem is what Detect found in a work dir: the test runner and how
// capstan verifies a fix with it.
type Ecosystem struct {
	// Runner is the test runner: "go", "pytest", "unittest", "jest",
	// "vitest" or "cargo".
	Runner string
	// Language names the language in prompts: "Go", "Python",
	// "JavaScript", "Rust".
	Language string
	// Evidence is the file that decided it ("go.mod", "pyproject.toml", …).
	Evidence string
	// TestCommand runs every test with one line per test (so failures are
	// named and no test can disappear unseen) and never reuses a cached
	// test result.
	TestCommand string
	// Protect are the globs of the files that decide whether the tests
	// pass (tests, test configuration, dependency manifests): the model
	// may not change them.
	Protect []string
	// Bash are the command prefixes the model may run with the Bash tool
	// besides git's ("go test", "python3 -m pytest", …).
	Bash []string
}

// ErrNoEcosystem is returned by Detect for a directory where no supported
// project file was found.
var ErrNoEcosystem = errors.New("no go.mod, pyproject.toml, setup.py, setup.cfg, pytest.ini, tox.ini, package.json or Cargo.toml")

// Detect reads the project files at the top of dir and returns its
// ecosystem. The first match wins: go.mod, Cargo.toml, package.json
// (jest or vitest among its dependencies or scripts), then Python
// (pytest when pytest is configured or required, else unittest).
func Detect(dir string) (Ecosystem, error) {
	read := func(name string) ([]byte, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		return b, err == nil
	}
	if _, ok := read("go.mod"); ok {
		return goModule, nil
	}
	if _, ok := read("Cargo.toml"); ok {
		return cargoCrate, nil
	}
	if b, ok := read("package.json"); ok {
		switch {
		case bytes.Contains(b, []byte(`"vitest"`)):
			return vitest, nil
		case bytes.Contains(b, []byte(`"jest"`)):
			return jest, nil
		}
		return Ecosystem{}, fmt.Errorf("package.json names neither jest nor vitest; name the test command with --check 'tests=COMMAND'")
	}
	for _, name := range []string{"pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", "setup.py", "requirements.txt", "requirements-dev.txt", "conftest.py"} {
		b, ok := read(name)
		if !ok {
			continue
		}
		if name == "pytest.ini" || name == "conftest.py" || bytes.Contains(b, []byte("pytest")) {
			return python("pytest", name), nil
		}
		for _, other := range []string{"pytest.ini", "conftest.py", "requirements-dev.txt", "tox.ini", "setup.cfg"} {
			if ob, ok := read(other); ok && (other == "pytest.ini" || other == "conftest.py" || bytes.Contains(ob, []byte("pytest"))) {
				return python("pytest", other), nil
			}
		}
		return python("unittest", name), nil
	}
	if pythonTests(dir) {
		return python("unittest", "test_*.py"), nil
	}
	return Ecosystem{}, ErrNoEcosystem
}

// pythonTests reports whether dir or a directory below it (two levels)
// holds a test_*.py file.
func pythonTests(dir string) bool {
	found := false
	root := filepath.Clean(dir)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipDir
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			if strings.HasPrefix(d.Name(), ".") && p != root || strings.Count(rel, string(filepath.Separator)) >= 2 {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), "test_") && strings.HasSuffix(d.Name(), ".py") {
			found = true
		}
		return nil
	})
	return found
}

var (
	goModule = Ecosystem{
		Runner: "go", Language: "Go", Evidence: "go.mod",
		TestCommand: "go test -count=1 -v ./...",
		Protect:     []string{"**/*_test.go", "**/testdata/**", "**/go.mod", "**/go.sum", "**/go.work", "**/go.work.sum"},
		Bash:        []string{"go test", "go build", "go vet"},
	}
	cargoCrate = Ecosystem{
		Runner: "cargo", Language: "Rust", Evidence: "Cargo.toml",
		TestCommand: "cargo test --no-fail-fast",
		Protect:     []string{"tests/**", "**/Cargo.toml", "**/Cargo.lock", "**/build.rs"},
		Bash:        []string{"cargo test", "cargo build", "cargo check"},
	}
	jest = Ecosystem{
		Runner: "jest", Language: "JavaScript", Evidence: "package.json",
		TestCommand: "npx --no-install jest --ci --verbose",
		Protect:     jsProtect("jest"),
		Bash:        []string{"npx --no-install jest", "npx jest", "npm test"},
	}
	vitest = Ecosystem{
		Runner: "vitest", Language: "JavaScript", Evidence: "package.json",
		TestCommand: "npx --no-install vitest run --reporter=verbose",
		Protect:     jsProtect("vitest"),
		Bash:        []string{"npx --no-install vitest", "npx vitest", "npm test"},
	}
)

func jsProtect(runner string) []string {
	return []string{"**/*.test.*", "**/*.spec.*", "**/__tests__/**", "**/package.json", "**/package-lock.json",
		"**/yarn.lock", "**/pnpm-lock.yaml", "**/" + runner + ".config.*", "**/vite.config.*"}
}

// python is the ecosystem of a Python project tested with runner
// ("pytest" or "unittest"). A validator runs the test command with
// Python's bytecode kept out of the work dir (in the validators' build
// cache, or nowhere) and, for pytest, no .pytest_cache: it leaves the work
// tree as it found it, so git-clean judges only the model's changes.
func python(runner, evidence string) Ecosystem {
	e := Ecosystem{
		Runner: runner, Language: "Python", Evidence: evidence,
		Protect: []string{"**/test_*.py", "**/*_test.py", "**/tests/**", "**/conftest.py", "**/pyproject.toml",
			"**/pytest.ini", "**/setup.cfg", "**/tox.ini", "**/setup.py", "**/requirements*.txt"},
	}
	if runner == "pytest" {
		e.TestCommand = "python3 -m pytest -v -p no:cacheprovider"
		e.Bash = []string{"python3 -m pytest", "pytest", "PYTHONDONTWRITEBYTECODE=1 python3 -m pytest"}
	} else {
		e.TestCommand = "python3 -m unittest discover -v"
		e.Bash = []string{"python3 -m unittest", "PYTHONDONTWRITEBYTECODE=1 python3 -m unittest"}
	}
	return e
}
