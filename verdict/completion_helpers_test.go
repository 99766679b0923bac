package verdict

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/verify"
)

// Test helpers shared with the validator tests of package verify.

// run runs a command in dir and fails the test on error.
func run(t testing.TB, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func write(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gitRepo makes a temp git repo with one commit.
func gitRepo(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	run(t, dir, "git", "init", "-q")
	write(t, dir, "main.go", "package main\n")
	write(t, dir, "old name.txt", "x\n")
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "commit", "-qm", "init")
	return dir
}

// goModule makes a tiny Go module whose test fails until Add is fixed.
func goModule(t testing.TB) string {
	t.Helper()
	dir := gitRepo(t)
	write(t, dir, "go.mod", "module example.com/tiny\n\ngo 1.21\n")
	write(t, dir, "main.go", "package main\n\nfunc Add(a, b int) int { return a - b }\n\nfunc main() {}\n")
	write(t, dir, "main_test.go", "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 2); got != 4 {\n\t\tt.Errorf(\"Add(2, 2) = %d, want 4 <&>\", got)\n\t}\n}\n")
	return dir
}

func registryValidators() map[string]agentdir.Validator {
	return map[string]agentdir.Validator{
		"git-clean": {Type: "command", Command: "git status --porcelain", SuccessWhen: "empty", FailurePattern: "git-dirty",
			ExtractParams: map[string]string{"changedFiles": "parseChangedFiles", "untrackedFiles": "parseUntrackedFiles"}},
		"tests-pass": {Type: "command", Command: "go test ./...", SuccessWhen: "exitCode:0", FailurePattern: "test-failed",
			ExtractParams: map[string]string{"failedTests": "parseTestOutput", "errorOutput": "stderr"}},
	}
}

// newValidator is verify.NewCompletionValidator for a configuration the test
// knows to be valid.
func newValidator(t testing.TB, cfg verify.ValidatorConfig) *verify.CompletionValidator {
	t.Helper()
	v, err := verify.NewCompletionValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// jsonSchemas is a real SchemaSource: schema files under dir compiled by
// the schema package, the schema name a key of the file.
type jsonSchemas struct{ dir string }

func (j jsonSchemas) Schema(ref agentdir.SchemaRef) (verify.SchemaValidator, error) {
	data, err := os.ReadFile(filepath.Join(j.dir, ref.File))
	if err != nil {
		return nil, err
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, err
	}
	raw, ok := file[ref.Schema]
	if !ok {
		return nil, fmt.Errorf("%s has no schema %q", ref.File, ref.Schema)
	}
	s, err := schema.CompileSource(schema.Source{Raw: raw, URL: "mem:///" + ref.File})
	if err != nil {
		return nil, err
	}
	return checked{s}, nil
}

type checked struct{ s *schema.Schema }

func (c checked) Validate(v any) error { return c.s.Check(v) }

func readOut(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "verify", "testdata", "out", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
