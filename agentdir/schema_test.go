package agentdir

import (
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/schemas"
)

// The embedded configuration schemas skip the meta-schema check when
// capstan starts; this test does it for them.
func TestEmbeddedSchemas(t *testing.T) {
	for url, doc := range map[string][]byte{schemas.AgentURL: schemas.Agent(), schemas.StepsRegistryURL: schemas.StepsRegistry()} {
		if _, err := schema.CompileSource(schema.Source{Raw: doc, URL: url}); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
	for kind, compile := range compiledSchemas {
		if _, err := compile(); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
}

// The tables the subset validator checks the configuration files with
// are the schemas compiled as go generate compiles them.
func TestTablesCurrent(t *testing.T) {
	for name, c := range map[string]struct {
		doc   []byte
		table *schema.SubsetTable
	}{
		"agent.schema.json":          {schemas.Agent(), agentTable},
		"steps_registry.schema.json": {schemas.StepsRegistry(), registryTable},
	} {
		want, err := schema.CompileSubset(c.doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(want, c.table) {
			t.Errorf("agentdir/schema_tables.go is stale for %s: run go generate ./agentdir", name)
		}
	}
}

// The subset validator checks the files, yet a problem keeps the field's
// description from the full schema in its hint, and its position; a type
// error's hint says first what to write.
func TestSchemaProblemHintIsTheDescription(t *testing.T) {
	a := baseAgent()
	a["displayName"] = 7
	res := Check(writeAgent(t, a, baseRegistry(), nil), testOpts)
	p := findProblem(t, res, "AC-SCHEMA-TYPE")
	if p.File != "agent.json" || p.Pointer != "/displayName" || p.Line == 0 || p.Column == 0 ||
		p.Hint != "write a string in double quotes; Human-readable name shown in progress output" {
		t.Errorf("problem %+v: want agent.json at /displayName with what to write and its description as the hint", p)
	}
}

// A value of the wrong type gets a hint that says what to write: the
// value unquoted when it is a quoted number or boolean, else the JSON type.
func TestSchemaTypeHintSaysWhatToWrite(t *testing.T) {
	for _, c := range []struct {
		set  func(map[string]any)
		ptr  string
		want string
	}{
		{func(a map[string]any) { at(a, "runner", "budgets")["maxIterations"] = "3" }, "/runner/budgets/maxIterations", "write 3 without the quotes; "},
		{func(a map[string]any) { at(a, "runner", "budgets")["maxIterations"] = "three" }, "/runner/budgets/maxIterations", "write a whole number (no quotes); "},
		{func(a map[string]any) { at(a, "runner", "boundaries")["sandbox"] = map[string]any{"enabled": "yes"} }, "/runner/boundaries/sandbox/enabled", "write true or false (no quotes); "},
		{func(a map[string]any) { at(a, "runner", "boundaries")["sandbox"] = map[string]any{"enabled": "true"} }, "/runner/boundaries/sandbox/enabled", "write true without the quotes; "},
		{func(a map[string]any) { at(a, "runner", "boundaries")["allowedTools"] = "Read" }, "/runner/boundaries/allowedTools", "write a list [ … ]; "},
	} {
		a := baseAgent()
		c.set(a)
		p := findProblem(t, Check(writeAgent(t, a, baseRegistry(), nil), testOpts), "AC-SCHEMA-TYPE")
		if p.Pointer != c.ptr || !strings.HasPrefix(p.Hint, c.want) || len(p.Hint) == len(c.want) {
			t.Errorf("%s: hint %q, want it to start with %q and go on with the field's description", c.ptr, p.Hint, c.want)
		}
	}
}
