package proc

import (
	"slices"
	"testing"
)

// The redactors of one environment share one secret list, which is
// SecretValues' list; a changed environment or CAPSTAN_SECRET_VARS is
// worked out again, and the caller's environ may change afterwards
// without changing the shared list.
func TestSharedSecretValuesFollowTheirInputs(t *testing.T) {
	t.Setenv(SecretVarsEnv, "")
	environ := []string{"PATH=/bin", "API_TOKEN=s3cret-token-1", "DB=postgres://u:dbpassw0rd@h/db", "PLAIN=notasecret"}
	a := sharedSecretValues(environ)
	b := sharedSecretValues(slices.Clone(environ))
	if len(a) == 0 || &a[0] != &b[0] {
		t.Fatalf("the same environment worked out a second list: %v %v", a, b)
	}
	if !slices.Equal(a, SecretValues(environ)) {
		t.Errorf("shared list %v differs from SecretValues' %v", a, SecretValues(environ))
	}
	environ[1] = "API_TOKEN=s3cret-token-2"
	if c := sharedSecretValues(environ); !slices.Contains(c, "s3cret-token-2") || slices.Contains(c, "s3cret-token-1") {
		t.Errorf("a changed environment kept the old list: %v", c)
	}
	if !slices.Contains(a, "s3cret-token-1") {
		t.Errorf("changing the caller's environ changed the shared list: %v", a)
	}
	if slices.Contains(sharedSecretValues(environ), "notasecret") {
		t.Fatal("PLAIN is no secret yet")
	}
	t.Setenv(SecretVarsEnv, "PLAIN")
	if !slices.Contains(sharedSecretValues(environ), "notasecret") {
		t.Error("a changed CAPSTAN_SECRET_VARS kept the old list")
	}
	if got := NewStreamRedactor(environ).Text("x notasecret y"); got != "x "+Redacted+" y" {
		t.Errorf("stream redactor after the change: %q", got)
	}
	if got := SecretRedactor(environ)("s3cret-token-2"); got != Redacted {
		t.Errorf("secret redactor after the change: %q", got)
	}
}
