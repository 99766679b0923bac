package schemas

import (
	"encoding/json"
	"testing"
)

func TestSchemasAreJSONWithMatchingIDs(t *testing.T) {
	for name, tc := range map[string]struct {
		doc []byte
		id  string
	}{
		"agent":          {Agent(), AgentURL},
		"steps_registry": {StepsRegistry(), StepsRegistryURL},
	} {
		var m map[string]any
		if err := json.Unmarshal(tc.doc, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m["$id"] != tc.id {
			t.Errorf("%s: $id = %v, want %s", name, m["$id"], tc.id)
		}
		if m["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: not draft 2020-12: %v", name, m["$schema"])
		}
	}
}

func TestAccessorsReturnCopies(t *testing.T) {
	a := Agent()
	a[0] = 'X'
	if Agent()[0] == 'X' {
		t.Fatal("Agent() exposes the embedded bytes")
	}
}

// Every property of every object in the schemas carries a description, so
// editors can show one on hover.
func TestEveryPropertyHasDescription(t *testing.T) {
	for name, doc := range map[string][]byte{"agent": Agent(), "steps_registry": StepsRegistry()} {
		var root any
		if err := json.Unmarshal(doc, &root); err != nil {
			t.Fatal(err)
		}
		var walk func(ptr string, v any)
		walk = func(ptr string, v any) {
			m, ok := v.(map[string]any)
			if !ok {
				return
			}
			if props, ok := m["properties"].(map[string]any); ok {
				for k, p := range props {
					pm, _ := p.(map[string]any)
					if _, ok := pm["description"]; !ok {
						t.Errorf("%s: %s/properties/%s has no description", name, ptr, k)
					}
					walk(ptr+"/properties/"+k, p)
				}
			}
			if defs, ok := m["$defs"].(map[string]any); ok {
				for k, d := range defs {
					walk(ptr+"/$defs/"+k, d)
				}
			}
			for _, k := range []string{"items", "additionalProperties"} {
				walk(ptr+"/"+k, m[k])
			}
		}
		walk("#", root)
	}
}
