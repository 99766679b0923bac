package builtin

import (
	"slices"
	"testing"

	"github.com/capstan-dev/capstan/procenv"
)

// Tool sets built with the same environment and allow list share one
// environment list; another allow list gets its own, and an append to a
// shared list never writes into it.
func TestCommandEnvIsSharedWhileItsInputsRepeat(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/home/u", "LANG=C", "FOO_A=1", "API_TOKEN=s3cret"}
	a := commandEnv(environ, []string{"FOO_*"})
	b := commandEnv(slices.Clone(environ), []string{"FOO_*"})
	if &a[0] != &b[0] {
		t.Error("the same inputs built a second list")
	}
	if !slices.Equal(a, procenv.ForCommands(environ, []string{"FOO_*"})) {
		t.Errorf("shared list %v differs from BuildEnv's", a)
	}
	c := commandEnv(environ, []string{"LANG"})
	if slices.Contains(c, "FOO_A=1") {
		t.Errorf("another allow list got the previous list: %v", c)
	}
	d := commandEnv(environ, []string{"LANG"})
	_ = append(d, "EXTRA=1")
	if e := commandEnv(environ, []string{"LANG"}); len(e) != len(d) || slices.Contains(e[:cap(e)], "EXTRA=1") {
		t.Errorf("an append changed the shared list: %v", e)
	}
}

// The redactors of one environment share one secret list, which is
// SecretValues' list; a changed environment or CAPSTAN_SECRET_VARS is
// worked out again, and the caller's environ may change afterwards
// without changing the shared list.
func TestSharedSecretValuesFollowTheirInputs(t *testing.T) {
	t.Setenv(procenv.SecretVarsEnv, "")
	environ := []string{"PATH=/bin", "API_TOKEN=s3cret-token-1", "DB=postgres://u:dbpassw0rd@h/db", "PLAIN=notasecret"}
	a := sharedSecretValues(environ)
	b := sharedSecretValues(slices.Clone(environ))
	if len(a) == 0 || &a[0] != &b[0] {
		t.Fatalf("the same environment worked out a second list: %v %v", a, b)
	}
	if !slices.Equal(a, procenv.SecretValues(environ)) {
		t.Errorf("shared list %v differs from SecretValues' %v", a, procenv.SecretValues(environ))
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
	t.Setenv(procenv.SecretVarsEnv, "PLAIN")
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
