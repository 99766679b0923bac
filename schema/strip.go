package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// annotations are the keywords that only describe a value (for people and
// editors) and never decide whether it is valid.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// definitionKeywords hold, besides schemaMapKeywords, objects whose member
// values are schemas (a member of "dependencies" may also be a list of
// names, which is left as it is).
var definitionKeywords = map[string]bool{"$defs": true, "definitions": true, "dependencies": true}

// StripAnnotations returns the schema document raw without its annotation
// keywords (title, description, examples, default, $comment, deprecated,
// readOnly, writeOnly) wherever they sit in a schema object, as compact
// JSON. Validating against the result gives the same outcome, with the same
// keyword and instance locations, as validating against raw; it compiles
// faster, because the compiler decodes every schema object. A property
// named like an annotation ("description" under "properties") is kept.
func StripAnnotations(raw []byte) ([]byte, error) {
	doc, err := Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	stripSchema(doc, 0)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// stripSchema removes the annotations of the schema object v and of every
// schema under it (the keywords that hold schemas are those the resolver
// walks: schemaKeywords, schemaArrayKeywords, schemaMapKeywords).
func stripSchema(v any, depth int) {
	m, ok := v.(map[string]any)
	if !ok || depth > maxDepth {
		return // a boolean schema, or not a schema
	}
	for k, x := range m {
		switch {
		case annotations[k]:
			delete(m, k)
		case schemaKeywords[k]:
			if list, ok := x.([]any); ok { // items as an array (drafts before 2020-12)
				for _, s := range list {
					stripSchema(s, depth+1)
				}
			} else {
				stripSchema(x, depth+1)
			}
		case schemaArrayKeywords[k]:
			list, _ := x.([]any)
			for _, s := range list {
				stripSchema(s, depth+1)
			}
		case schemaMapKeywords[k] || definitionKeywords[k]:
			members, _ := x.(map[string]any)
			for _, s := range members {
				stripSchema(s, depth+1)
			}
		}
	}
}
