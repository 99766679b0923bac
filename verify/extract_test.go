package verify

import (
	"github.com/capstan-dev/capstan/event"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readOut(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "out", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The outputs in testdata/out/go_*.txt and node_*.txt were produced by
// running go 1.26 and node 20 on small failing test suites; the others are
// transcribed tool output formats.
func TestParseTestOutputRealOutputs(t *testing.T) {
	type want struct{ name, errContains string }
	cases := []struct {
		file string
		want []want
	}{
		{"go_plain.txt", []want{{"TestAdd", `Add(1, 2) = -1, want 3 <b>&"x"`}, {"TestTable/pos", "got 0\nwant 4"}}},
		{"go_v.txt", []want{{"TestAdd", `want 3 <b>&"x"`}, {"TestTable/pos", "got 0"}}},
		{"go_json.txt", []want{{"TestAdd", `want 3 <b>&"x"`}, {"TestTable/pos", "got 0\nwant 4"}}},
		{"go_panic.txt", []want{{"TestAdd", "want 3"}, {"TestTable/pos", "got 0"}, {"TestPanic", "index out of range"}}},
		{"go_buildfail_plain.txt", []want{{"example.com/m [build failed]", "declared and not used: x"}}},
		{"go_buildfail_json.txt", []want{{"example.com/m [build failed]", `cannot use "s"`}}},
		{"node_tap.txt", []want{{"adds", "Expected values to be strictly equal:\n\n3 !== 4"}, {`inner <x> & "q"`, `boom <x> & "q"`}}},
		{"node_spec.txt", []want{{"adds", "3 !== 4"}, {`inner <x> & "q"`, `Error: boom <x> & "q"`}}},
		{"pytest.txt", []want{{"tests/test_calc.py::test_add", "assert 3 == 4\n+  where 3 = add(1, 2)"},
			{"tests/test_calc.py::TestDiv::test_by_zero", "ZeroDivisionError: division by zero"}}},
		{"jest.txt", []want{{"Calculator › adds numbers", `Expected: "<4> & \"four\""` + "\nReceived: 3"}}},
	}
	for _, c := range cases {
		got := ParseTestOutput(readOut(t, c.file))
		if len(got) != len(c.want) {
			t.Errorf("%s: got %d failures %+v, want %d", c.file, len(got), got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if got[i].Name != w.name || !strings.Contains(got[i].Error, w.errContains) {
				t.Errorf("%s[%d]: got {%q, %q}, want name %q with error containing %q", c.file, i, got[i].Name, got[i].Error, w.name, w.errContains)
			}
		}
	}
}

func TestParseTestOutputPassingAndEmpty(t *testing.T) {
	for _, s := range []string{"", "ok  \texample.com/m\t0.01s\n", "PASS\n", "TAP version 13\nok 1 - x\n1..1\n",
		"not ok 1 - skipped thing # SKIP no db\n"} {
		if got := ParseTestOutput(s); len(got) != 0 {
			t.Errorf("%q: got %+v", s, got)
		}
	}
	if got := ParseTestOutput(""); got == nil {
		t.Error("nil slice; want empty (renders as [] and is falsy in templates)")
	}
}

func TestParseTypeErrors(t *testing.T) {
	cases := []struct {
		file string
		want []TypeError
	}{
		{"go_build.txt", []TypeError{
			{File: "./bad.go", Line: 6, Column: 6, Message: "declared and not used: x"},
			{File: "./bad.go", Line: 6, Column: 14, Message: `cannot use "s" (untyped string constant) as int value in variable declaration`}}},
		{"tsc.txt", []TypeError{
			{File: "src/index.ts", Line: 3, Column: 7, Code: "TS2322", Message: "Type 'string' is not assignable to type 'number'."},
			{File: "src/util.ts", Line: 10, Column: 15, Code: "TS2339", Message: "Property 'foo' does not exist on type '{}'."}}},
		{"tsc_pretty.txt", []TypeError{
			{File: "src/index.ts", Line: 3, Column: 7, Code: "TS2322", Message: "Type 'string' is not assignable to type 'number'."}}},
		{"deno_check.txt", []TypeError{
			{File: "/repo/src/main.ts", Line: 3, Column: 7, Code: "TS2322", Message: "Type 'string' is not assignable to type 'number'."},
			{File: "/repo/src/util.ts", Line: 10, Column: 9, Code: "TS2345", Message: "Argument of type 'number' is not assignable to parameter of type 'string'."}}},
		{"deno_check_old.txt", []TypeError{
			{File: "/repo/mod.ts", Line: 1, Column: 13, Code: "TS2304", Message: "Cannot find name 'missing'."}}},
	}
	for _, c := range cases {
		if got := ParseTypeErrors(readOut(t, c.file)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, c.want)
		}
	}
	got := ParseTypeErrors("app/models.py:12: error: Incompatible return value type (got \"int\", expected \"str\")  [return-value]\n")
	if len(got) != 1 || got[0].Code != "return-value" || got[0].Line != 12 {
		t.Errorf("mypy: %+v", got)
	}
}

func TestParseLintErrors(t *testing.T) {
	cases := []struct {
		file string
		want []LintError
	}{
		{"golangci.txt", []LintError{
			{File: "main.go", Line: 10, Column: 2, Rule: "ineffassign", Message: "ineffectual assignment to err"},
			{File: "pkg/util/util.go", Line: 25, Column: 9, Rule: "errcheck", Message: "Error return value of `f.Close` is not checked"}}},
		{"eslint_unix.txt", []LintError{
			{File: "/home/u/proj/src/app.js", Line: 1, Column: 7, Severity: "error", Rule: "no-unused-vars", Message: "'unused' is assigned a value but never used."},
			{File: "/home/u/proj/src/app.js", Line: 4, Column: 1, Severity: "warning", Rule: "no-console", Message: "Unexpected console statement."}}},
		{"eslint_stylish.txt", []LintError{
			{File: "/home/u/proj/src/app.js", Line: 1, Column: 7, Severity: "error", Rule: "no-unused-vars", Message: "'unused' is assigned a value but never used"},
			{File: "/home/u/proj/src/app.js", Line: 4, Column: 1, Severity: "warning", Rule: "no-console", Message: "Unexpected console statement"}}},
		{"go_vet.txt", []LintError{
			{File: "vet.go", Line: 6, Column: 14, Message: `fmt.Printf format %d has arg "str" of wrong type string`}}},
	}
	for _, c := range cases {
		if got := ParseLintErrors(readOut(t, c.file)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, c.want)
		}
	}
}

func TestParseFormatOutput(t *testing.T) {
	if got := ParseFormatOutput(readOut(t, "prettier.txt")); !reflect.DeepEqual(got, []string{"src/app.js", "src/util/helpers.ts"}) {
		t.Errorf("prettier: %q", got)
	}
	if got := ParseFormatOutput("a.go\nsub/b.go\n"); !reflect.DeepEqual(got, []string{"a.go", "sub/b.go"}) {
		t.Errorf("gofmt -l: %q", got)
	}
	if got := ParseFormatOutput("would reformat src/x.py\nOh no! 1 file would be reformatted.\n"); !reflect.DeepEqual(got, []string{"src/x.py"}) {
		t.Errorf("black: %q", got)
	}
}

func TestParsePorcelain(t *testing.T) {
	out := " M main.go\nM  staged.go\nMM both.go\nA  new.go\n D gone.go\nR  old.go -> renamed.go\n" +
		`R  "old name.txt" -> "new \"name\".txt"` + "\n" +
		`?? "caf\303\251.txt"` + "\n?? notes/\n!! ignored.log\n" + `?? "tab\there.txt"` + "\n"
	changed := ParseChangedFiles(out)
	wantChanged := []string{"main.go", "staged.go", "both.go", "new.go", "gone.go", "renamed.go", `new "name".txt`}
	if !reflect.DeepEqual(changed, wantChanged) {
		t.Errorf("changed = %q\nwant %q", changed, wantChanged)
	}
	untracked := ParseUntrackedFiles(out)
	if !reflect.DeepEqual(untracked, []string{"café.txt", "notes/", "tab\there.txt"}) {
		t.Errorf("untracked = %q", untracked)
	}
	if got := ParseChangedFiles(""); got == nil || len(got) != 0 {
		t.Errorf("empty: %#v", got)
	}
}

func TestExtractorsListed(t *testing.T) {
	names := Extractors()
	for _, n := range []string{"parseChangedFiles", "parseUntrackedFiles", "parseTestOutput", "parseTypeErrors",
		"parseLintErrors", "stdout", "stderr", "exitCode"} {
		if _, ok := Extract(n, event.ValidatorOutput{}); !ok {
			t.Errorf("extractor %s missing", n)
		}
		found := false
		for _, x := range names {
			found = found || x == n
		}
		if !found {
			t.Errorf("Extractors() lacks %s", n)
		}
	}
	if _, ok := Extract("parseMagic", event.ValidatorOutput{}); ok {
		t.Error("unknown extractor accepted")
	}
	v, _ := Extract("exitCode", event.ValidatorOutput{ExitCode: 3})
	if v != 3 {
		t.Errorf("exitCode = %v", v)
	}
}

func FuzzParseTestOutput(f *testing.F) {
	for _, n := range []string{"go_plain.txt", "go_v.txt", "go_json.txt", "node_tap.txt", "node_spec.txt", "pytest.txt", "jest.txt", "go_panic.txt"} {
		f.Add(readOut(f, n))
	}
	f.Add("not ok 1 - x\n  ---\n  error: [\n  ...\n")
	f.Add("--- FAIL: \n")
	f.Fuzz(func(t *testing.T, s string) {
		got := ParseTestOutput(s)
		seen := map[string]bool{}
		for _, tf := range got {
			if tf.Name == "" || tf.Name != strings.TrimSpace(tf.Name) {
				t.Fatalf("bad name %q", tf.Name)
			}
			if seen[tf.Name] {
				t.Fatalf("duplicate %q", tf.Name)
			}
			seen[tf.Name] = true
		}
	})
}

func FuzzParseTypeErrors(f *testing.F) {
	for _, n := range []string{"go_build.txt", "tsc.txt", "tsc_pretty.txt", "go_vet.txt"} {
		f.Add(readOut(f, n))
	}
	f.Add("a.go:1:2:\n(1,2): error TS1: x\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range ParseTypeErrors(s) {
			if e.File == "" || e.Line < 0 || e.Column < 0 || strings.Contains(e.Message, "\n") {
				t.Fatalf("bad diagnostic %+v", e)
			}
		}
		for _, e := range ParseLintErrors(s) {
			if e.File == "" || strings.Contains(e.Message, "\n") {
				t.Fatalf("bad lint finding %+v", e)
			}
		}
	})
}

func FuzzParsePorcelain(f *testing.F) {
	f.Add(" M a.go\nR  \"x y\" -> \"z\\303\\251\"\n?? \"q\\\"\"\n")
	f.Add("R  a -> \n")
	f.Add("?? \"\\\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range append(ParseChangedFiles(s), ParseUntrackedFiles(s)...) {
			if p == "" && !strings.Contains(s, "->") {
				t.Fatalf("empty path from %q", s)
			}
		}
		ParseFormatOutput(s)
	})
}
