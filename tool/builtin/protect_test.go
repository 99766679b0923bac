package builtin

import (
	"strings"
	"testing"
)

func TestWriteAndEditRefuseProtectedFiles(t *testing.T) {
	var asked []string
	e := newEnv(t, func(c *Config) {
		c.Protected = func(rel string) bool {
			asked = append(asked, rel)
			return strings.HasSuffix(rel, "_test.go")
		}
	})
	const orig = "package calc\n\nfunc TestAdd() {}\n"
	e.write("pkg/calc_test.go", orig)
	e.symlink("pkg/calc_test.go", "alias.go")

	for _, c := range []struct {
		tool  string
		input m
	}{
		{NameWrite, m{"file_path": "pkg/calc_test.go", "content": "package calc\n"}},
		{NameEdit, m{"file_path": "pkg/calc_test.go", "old_string": "TestAdd", "new_string": "TestNothing"}},
		// A link to a protected file is the file: the resolved path decides.
		{NameWrite, m{"file_path": "alias.go", "content": "x"}},
		{NameEdit, m{"file_path": "./pkg/../alias.go", "old_string": "TestAdd", "new_string": "X"}},
		// A new protected file cannot be created either.
		{NameWrite, m{"file_path": "pkg/extra_test.go", "content": "package calc\n"}},
		{NameEdit, m{"file_path": "new_test.go", "old_string": "", "new_string": "package calc\n"}},
	} {
		msg := mustFail(t, e.call(c.tool, c.input), "TOOL_INPUT")
		if !strings.Contains(msg, "is protected (verification protect globs)") || !strings.Contains(msg, c.input["file_path"].(string)) {
			t.Errorf("%s %v: %s", c.tool, c.input, msg)
		}
	}
	if got, _ := e.read("pkg/calc_test.go"); got != orig {
		t.Fatalf("protected file changed: %q", got)
	}
	for _, p := range []string{"pkg/extra_test.go", "new_test.go"} {
		if _, ok := e.read(p); ok {
			t.Fatalf("%s was created", p)
		}
	}
	for _, rel := range asked {
		if rel == "alias.go" {
			t.Fatal("the protection was asked about the link, not the file it resolves to")
		}
	}
	// Other files stay writable.
	mustOK(t, e.call(NameWrite, m{"file_path": "pkg/calc.go", "content": "package calc\n"}))
	mustOK(t, e.call(NameEdit, m{"file_path": "pkg/calc.go", "old_string": "calc", "new_string": "calc2"}))
}
