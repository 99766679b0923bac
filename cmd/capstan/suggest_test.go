package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A mistyped command or flag gets the one it probably meant, and a value
// that does not parse is named in the flag's own words, not strconv's.
func TestTyposGetSuggestions(t *testing.T) {
	sh := pasteShell(t, t.TempDir())
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]string{
		"capstan rn":                `unknown command "rn" for "capstan"; did you mean run or runs?`,
		"capstan runs --workdirr x": "unknown flag: --workdirr; did you mean --workdir?",
		"capstan run " + shellQuote(hello) + " --modle x":          "unknown flag: --modle; did you mean --model?",
		"capstan run " + shellQuote(hello) + " --max-iterations x": `--max-iterations wants a whole number, such as 5, not "x"`,
		"capstan fix 'x' --connect-timeout 3q":                     `--connect-timeout wants a duration, such as 30s, 2m or 1h30m, not "3q"`,
	} {
		code, out := sh(line)
		if code != exitUsage || !strings.Contains(out, want) || strings.Contains(out, "strconv") {
			t.Errorf("%s: exit %d\n%s\nwant %q", line, code, out, want)
		}
	}
}
