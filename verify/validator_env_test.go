package verify

import (
	"context"
	"github.com/capstan-dev/capstan/agentdir"
	"strings"
	"testing"
)

// TestValidatorEnvironmentPolicy: a validator command gets the minimal
// base plus the allow-list, never capstan's whole environment, and a
// secret passed on purpose is redacted in the output the journal and the
// retry prompt see.
func TestValidatorEnvironmentPolicy(t *testing.T) {
	t.Setenv("VALIDATOR_TEST_TOKEN", "vt-0123456789-secret")
	t.Setenv("VALIDATOR_UNLISTED", "not-for-validators")
	v := newValidator(t, ValidatorConfig{
		Validators: map[string]agentdir.Validator{
			"env": {Type: "command", Command: "env; exit 1", SuccessWhen: "exitCode:0", FailurePattern: "env-failed"},
		},
		Patterns: map[string]agentdir.CompletionPattern{"env-failed": {Edition: "failed"}},
		WorkDir:  t.TempDir(),
		Env:      []string{"VALIDATOR_TEST_TOKEN"},
	})
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "env"}})
	if err != nil || r.Valid || r.Output == nil {
		t.Fatalf("%+v %v", r, err)
	}
	out := r.Output.Stdout
	if strings.Contains(out, "vt-0123456789-secret") || !strings.Contains(out, "VALIDATOR_TEST_TOKEN=[REDACTED]") {
		t.Errorf("secret not redacted:\n%s", out)
	}
	if strings.Contains(out, "VALIDATOR_UNLISTED") || !strings.Contains(out, "PATH=") {
		t.Errorf("environment is not the base plus the allow-list:\n%s", out)
	}
}
