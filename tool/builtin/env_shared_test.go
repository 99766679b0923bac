package builtin

import (
	"slices"
	"testing"

	"github.com/capstan-dev/capstan/proc"
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
	if !slices.Equal(a, proc.ForCommands(environ, []string{"FOO_*"})) {
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
