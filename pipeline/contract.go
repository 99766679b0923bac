package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/capstan-dev/capstan/schema"
)

// keyRule is the compiled check of one key.
type keyRule struct {
	spec   KeySpec
	schema *schema.Schema
}

// compileKeySchema compiles spec.Schema, if any.
func compileKeySchema(spec KeySpec) (*schema.Schema, error) {
	if len(spec.Schema) == 0 {
		return nil, nil
	}
	return compileSchema("key:"+spec.Name, spec.Schema)
}

// compileSchema compiles a self-contained JSON Schema document.
func compileSchema(name string, raw json.RawMessage) (*schema.Schema, error) {
	return schema.CompileSource(schema.Source{Raw: raw, URL: "mem:///" + name + ".json"})
}

// check applies the key's rule to e (nil when the key is absent) and
// returns the violation message, or "" when the contract holds. phase is
// "precondition" or "postcondition".
func (r keyRule) check(phase string, e *entry) string {
	key := r.spec.Name
	prefix := phase + " validation failed: "
	if e == nil {
		return prefix + key + " not found"
	}
	want := string(r.spec.Type)
	if want == "" {
		want = "value"
	}
	if e.null {
		return fmt.Sprintf("%sexpected %s, got nil (%s)", prefix, want, key)
	}
	if r.spec.Type != TypeAny && e.kind != r.spec.Type {
		return fmt.Sprintf("%sexpected %s, got %s (%s)", prefix, want, e.kind, key)
	}
	if e.empty && !r.spec.AllowEmpty {
		return prefix + key + " is empty"
	}
	if r.schema != nil {
		if err := r.schema.Check(e.raw); err != nil {
			return fmt.Sprintf("%s%s does not match its schema: %v", prefix, key, err)
		}
	}
	return ""
}
