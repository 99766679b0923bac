package verdict

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/verify"
)

// The work dirs of the validator tests, the same in verify's and
// verdict's tests.
var (
	run      = testenv.MustRun
	write    = testenv.WriteFile
	gitRepo  = testenv.TinyGitRepo
	goModule = testenv.TinyGoModule
)

// Test helpers shared with the validator tests of package verify.

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
