package verify

import (
	"os/exec"
	"testing"
)

// TestWhyCannotFail checks each answer against sh itself: a command said
// to be unable to fail exits 0 in an empty directory although every
// command it could fail by is false, and a command it lets run exits
// non-zero there.
func TestWhyCannotFail(t *testing.T) {
	cannotFail := []string{
		"", "   ", "# just a comment", "X=1", "X=1 Y=two", `X="$HOME"'s' Y=${PATH}`,
		"true", ":", ": ignored args", "X=1 true", "exit 0",
		"false || true", "false || :", "true || false", "false | true",
		"false &", "{ false; true; }", "(false; :)", "false; true", "false\nX=1",
		"false && false || true",
	}
	canFail := []string{
		"false", "X=1 false", "X=$(false)", "X=`false`", "X=$((1/0))", ": ${UNSET_CAPSTAN_VAR?unset}",
		"true; false", "! true", "true > /nonexistent/dir/file", "false && true", "true && false",
		"true | false", "exit 1", "set -e; false; true", "(set -e; false; true)",
		"{ exit 3; }; true", "false || exit 2",
		"X=1 Y=${UNSET_CAPSTAN_VAR:?no}",
	}
	cannotTell := []string{
		"f() { true; }; true", "exit 0; false", "if false; then true; fi", "eval false; true", "'unclosed",
	}
	dir := t.TempDir()
	shell := func(c string) error {
		cmd := exec.Command("sh", "-c", c)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		return cmd.Run()
	}
	for _, c := range cannotFail {
		if why := WhyCannotFail(c); why == "" {
			t.Errorf("WhyCannotFail(%q) = \"\", want a reason", c)
		}
		if err := shell(c); err != nil {
			t.Errorf("sh -c %q: %v, want exit 0 (the case is wrong)", c, err)
		}
	}
	for _, c := range canFail {
		if why := WhyCannotFail(c); why != "" {
			t.Errorf("WhyCannotFail(%q) = %q, want \"\"", c, why)
		}
		if err := shell(c); err == nil {
			t.Errorf("sh -c %q exited 0, want non-zero (the case is wrong)", c)
		}
	}
	for _, c := range cannotTell {
		if why := WhyCannotFail(c); why != "" {
			t.Errorf("WhyCannotFail(%q) = %q, want \"\"", c, why)
		}
	}
}
