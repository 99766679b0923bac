package testfix

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string
		runner  string
		command string
	}{
		{"go", map[string]string{"go.mod": "module x\n"}, "go", "go test -count=1 -v ./..."},
		{"cargo", map[string]string{"Cargo.toml": "[package]\n"}, "cargo", "cargo test --no-fail-fast"},
		{"vitest", map[string]string{"package.json": `{"devDependencies": {"vitest": "^3"}}`}, "vitest", "npx --no-install vitest run --reporter=verbose"},
		{"jest", map[string]string{"package.json": `{"scripts": {"test": "jest"}, "devDependencies": {"jest": "29"}}`}, "jest", "npx --no-install jest --ci --verbose"},
		{"pytest configured", map[string]string{"pyproject.toml": "[tool.pytest.ini_options]\n"}, "pytest", "python3 -m pytest -v -p no:cacheprovider"},
		{"pytest required", map[string]string{"setup.py": "", "requirements-dev.txt": "pytest==8\n"}, "pytest", "python3 -m pytest -v -p no:cacheprovider"},
		{"conftest", map[string]string{"conftest.py": ""}, "pytest", "python3 -m pytest -v -p no:cacheprovider"},
		{"unittest project", map[string]string{"pyproject.toml": "[project]\nname = \"x\"\n"}, "unittest", "python3 -m unittest discover -v"},
		{"unittest files", map[string]string{"tests/test_calc.py": "import unittest\n"}, "unittest", "python3 -m unittest discover -v"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, c.files)
			e, err := Detect(dir)
			if err != nil || e.Runner != c.runner || e.TestCommand != c.command || len(e.Protect) == 0 {
				t.Fatalf("Detect = %+v, %v", e, err)
			}
		})
	}
	if _, err := Detect(t.TempDir()); !errors.Is(err, ErrNoEcosystem) {
		t.Errorf("an empty dir: %v", err)
	}
	dir := t.TempDir()
	write(t, dir, map[string]string{"package.json": `{"scripts": {"test": "mocha"}}`})
	if _, err := Detect(dir); err == nil || !strings.Contains(err.Error(), "--check 'tests=COMMAND'") {
		t.Errorf("a package.json without jest or vitest: %v", err)
	}
}

func TestParseCheck(t *testing.T) {
	for in, want := range map[string]Check{
		"tests=make test":          {Name: "tests", Command: "make test"},
		"go vet ./...":             {Name: "check-2", Command: "go vet ./..."},
		"FOO=1 make lint":          {Name: "check-2", Command: "FOO=1 make lint"},
		"lint=ruff check .":        {Name: "lint", Command: "ruff check ."},
		"go test -run=TestX ./...": {Name: "check-2", Command: "go test -run=TestX ./..."},
	} {
		if got, err := ParseCheck(in, 2); err != nil || got != want {
			t.Errorf("ParseCheck(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "  ", "lint="} {
		if _, err := ParseCheck(bad, 1); err == nil {
			t.Errorf("ParseCheck(%q): no error", bad)
		}
	}
	// Checks that pass whatever the work dir holds are refused, with the
	// code of a configuration error and a hint.
	for _, always := range []string{"X=1", "FOO=bar BAZ=1", "true", "lint=:", "tests=X=1", "vet=go vet ./... || true", "# later"} {
		_, err := ParseCheck(always, 1)
		e := agenterr.From(err)
		if e == nil || e.Code != agenterr.CodeConfigurationValidation || !strings.Contains(e.Message, "always passes") || e.Hint == "" {
			t.Errorf("ParseCheck(%q) = %v, want a CONFIG_INVALID error saying it always passes, with a hint", always, err)
		}
	}
}

// The agent Config builds validates as Go values, with the test command
// replaced and a check added, and has a retry prompt for every pattern
// its validators can fail with.
func TestConfigValidates(t *testing.T) {
	eco := goModule
	cfg, err := Config(Options{Task: "make the failing tests pass", Ecosystem: &eco, Model: "script:script.yaml", Script: []byte("turns:\n  - text: done\n"),
		Checks: []Check{{Name: "tests", Command: "go test -count=1 -v ./calc"}, {Name: "vet", Command: "go vet ./..."}}})
	if err != nil {
		t.Fatal(err)
	}
	reg := cfg.Registry
	if got := reg.Validators["tests-pass"].Command; got != "go test -count=1 -v ./calc" {
		t.Errorf("tests-pass runs %q", got)
	}
	if reg.Validators["vet"].FailurePattern != PatternCheckFailed {
		t.Errorf("vet: %+v", reg.Validators["vet"])
	}
	var names []string
	for _, c := range reg.Steps[StepID].CompletionConditions {
		names = append(names, c.Validator)
	}
	if strings.Join(names, " ") != "tests-pass vet git-clean" {
		t.Errorf("conditions %v", names)
	}
	defined, err := agent.Define(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w := defined.Agent.Warnings(); len(w) > 0 {
		t.Errorf("warnings: %v", w)
	}
	if _, err := Config(Options{Task: " "}); err == nil {
		t.Error("an empty task builds")
	}
	if _, err := Config(Options{Task: "x"}); !errors.Is(err, ErrNoEcosystem) {
		t.Errorf("no ecosystem and no tests check: %v", err)
	}
}

// WriteFolder writes a folder the folder loader accepts without a
// warning, and refuses a directory that is not empty.
func TestWriteFolderLoads(t *testing.T) {
	eco := python("pytest", "pyproject.toml")
	cfg, err := Config(Options{Task: "fix it", Ecosystem: &eco, Model: "script:s.yaml", Script: []byte("turns:\n  - text: done\n")})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "agent")
	if err := WriteFolder(cfg, dir); err != nil {
		t.Fatal(err)
	}
	a, err := agent.LoadPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	if w := a.Warnings(); len(w) > 0 {
		t.Errorf("warnings: %v", w)
	}
	if got := a.Definition().Runner.Verification.Protect; len(got) == 0 {
		t.Error("the folder protects nothing")
	}
	if p, ok := a.Params()[0], len(a.Params()) == 1; !ok || p.Default != "fix it" {
		t.Errorf("params %+v", a.Params())
	}
	if err := WriteFolder(cfg, dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("written over: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}
