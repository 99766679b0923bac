package config

import (
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
	if _, err := compiledSchemas(); err != nil {
		t.Fatal(err)
	}
}
