package config

import (
	"bytes"
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

// The copies capstan compiles are the schemas without their annotations,
// as go generate writes them.
func TestStrippedSchemasCurrent(t *testing.T) {
	for name, c := range map[string]struct{ doc, stripped []byte }{
		"agent.schema.json":          {schemas.Agent(), strippedAgentSchema},
		"steps_registry.schema.json": {schemas.StepsRegistry(), strippedRegistrySchema},
	} {
		want, err := schema.StripAnnotations(c.doc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, c.stripped) {
			t.Errorf("config/embedded/%s is stale: run go generate ./config", name)
		}
	}
}

// capstan compiles the stripped copies, yet a problem keeps the field's
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
