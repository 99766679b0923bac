package config

import (
	"reflect"
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
			t.Errorf("config/schema_tables.go is stale for %s: run go generate ./config", name)
		}
	}
}

// The subset validator checks the files, yet a problem keeps the field's
// description from the full schema as its hint, and its position.
func TestSchemaProblemHintIsTheDescription(t *testing.T) {
	a := baseAgent()
	a["displayName"] = 7
	res := Check(writeAgent(t, a, baseRegistry(), nil), testOpts)
	p := findProblem(t, res, "AC-SCHEMA-TYPE")
	if p.File != "agent.json" || p.Pointer != "/displayName" || p.Line == 0 || p.Column == 0 ||
		p.Hint != "Human-readable name shown in progress output." {
		t.Errorf("problem %+v: want agent.json at /displayName with its description as the hint", p)
	}
}
