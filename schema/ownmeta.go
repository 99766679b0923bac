package schema

import "slices"

// capstan's own meta-schemas for drafts 2019-09 and 2020-12 (drafts 4, 6
// and 7 use the ones the library carries). Each is generated from the
// table below: which keywords the draft defines and what kind of value each
// takes. Keywords the table does not name stay allowed, as the drafts
// allow them.

// valueKinds are the kinds of keyword value, as subschemas of the
// generated meta-schema ("$defs"). A subschema is referred to as "#", the
// meta-schema itself; "#/$defs/keywords" checks an object's keywords
// without requiring an object. A value that may take two forms is checked
// with keywords that each apply to one form only (items to an array, the
// keywords to an object, an if/then on the value's type), so a problem is
// reported once, against the form the value has.
func valueKinds(anchorPattern string) map[string]any {
	simpleTypes := map[string]any{"enum": []any{"array", "boolean", "integer", "null", "number", "object", "string"}}
	schemas := map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"$ref": "#"}}
	names := map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "uniqueItems": true}
	return map[string]any{
		// A subschema: an object or a boolean.
		"schema": map[string]any{"$ref": "#"},
		// A non-empty array of subschemas (allOf, prefixItems, ...).
		"schemas": schemas,
		// An object whose members are subschemas (properties, $defs, ...).
		"schemaMap": map[string]any{"type": "object", "additionalProperties": map[string]any{"$ref": "#"}},
		// A subschema, or (items before 2020-12) an array of them.
		"schemaOrSchemas": map[string]any{"type": []any{"object", "boolean", "array"}, "$ref": "#/$defs/keywords",
			"items": map[string]any{"$ref": "#"}, "minItems": 1},
		// A non-negative integer (minLength, maxItems, ...).
		"count":   map[string]any{"type": "integer", "minimum": 0},
		"number":  map[string]any{"type": "number"},
		"divisor": map[string]any{"type": "number", "exclusiveMinimum": 0},
		"string":  map[string]any{"type": "string"},
		"boolean": map[string]any{"type": "boolean"},
		"array":   map[string]any{"type": "array"},
		// A URI reference that names a resource, not a place in one: no
		// fragment but an empty one.
		"id":     map[string]any{"type": "string", "pattern": "^[^#]*#?$"},
		"anchor": map[string]any{"type": "string", "pattern": anchorPattern},
		// A type name, or a non-empty array of distinct ones.
		"types": map[string]any{"type": []any{"string", "array"},
			"if": map[string]any{"type": "string"}, "then": simpleTypes,
			"items": simpleTypes, "minItems": 1, "uniqueItems": true},
		// Distinct property names (required).
		"names": names,
		// Property name → distinct property names (dependentRequired).
		"namesMap": map[string]any{"type": "object", "additionalProperties": names},
		// The older dependencies: property name → subschema or names.
		"dependencies": map[string]any{"type": "object", "additionalProperties": map[string]any{
			"type": []any{"object", "boolean", "array"}, "$ref": "#/$defs/keywords",
			"items": map[string]any{"type": "string"}, "uniqueItems": true}},
		// Vocabulary URI → whether a validator must know it.
		"vocabulary": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "boolean"}},
	}
}

// keyword is a keyword and the kind of value it takes (a name in
// valueKinds). The tables are slices, not maps, so that nothing is built
// when the program starts.
type keyword struct{ name, kind string }

// keywordsBoth are the keywords drafts 2019-09 and 2020-12 share, with
// the kind of value each takes. const and default take any value.
var keywordsBoth = []keyword{
	// Identifying and referring.
	{"$schema", "string"}, {"$id", "id"}, {"$ref", "string"}, {"$anchor", "anchor"},
	{"$defs", "schemaMap"}, {"$comment", "string"}, {"$vocabulary", "vocabulary"},
	// Subschemas applied to parts of the value.
	{"allOf", "schemas"}, {"anyOf", "schemas"}, {"oneOf", "schemas"}, {"not", "schema"},
	{"if", "schema"}, {"then", "schema"}, {"else", "schema"},
	{"properties", "schemaMap"}, {"patternProperties", "schemaMap"}, {"additionalProperties", "schema"},
	{"propertyNames", "schema"}, {"dependentSchemas", "schemaMap"},
	{"contains", "schema"}, {"unevaluatedItems", "schema"}, {"unevaluatedProperties", "schema"},
	// Assertions on the value.
	{"type", "types"}, {"enum", "array"}, {"multipleOf", "divisor"},
	{"maximum", "number"}, {"exclusiveMaximum", "number"}, {"minimum", "number"}, {"exclusiveMinimum", "number"},
	{"maxLength", "count"}, {"minLength", "count"}, {"pattern", "string"},
	{"maxItems", "count"}, {"minItems", "count"}, {"uniqueItems", "boolean"}, {"maxContains", "count"}, {"minContains", "count"},
	{"maxProperties", "count"}, {"minProperties", "count"}, {"required", "names"}, {"dependentRequired", "namesMap"},
	// Annotations.
	{"title", "string"}, {"description", "string"}, {"deprecated", "boolean"}, {"readOnly", "boolean"},
	{"writeOnly", "boolean"}, {"examples", "array"}, {"format", "string"},
	{"contentEncoding", "string"}, {"contentMediaType", "string"}, {"contentSchema", "schema"},
	// Keywords of earlier drafts that both still describe.
	{"definitions", "schemaMap"}, {"dependencies", "dependencies"},
}

// keywords2019 are the keywords only 2019-09 has.
var keywords2019 = []keyword{
	{"$recursiveRef", "string"}, {"$recursiveAnchor", "boolean"},
	{"items", "schemaOrSchemas"}, {"additionalItems", "schema"},
}

// keywords2020 are the keywords only 2020-12 has.
var keywords2020 = []keyword{
	{"$dynamicRef", "string"}, {"$dynamicAnchor", "anchor"},
	{"prefixItems", "schemas"}, {"items", "schema"},
}

// ownMetaSchema returns the meta-schema capstan checks schemas of d with;
// ok is false for the drafts the library carries a meta-schema for.
func ownMetaSchema(d *draft) (doc map[string]any, ok bool) {
	var only []keyword
	var anchorPattern string
	switch d {
	case draft201909:
		only, anchorPattern = keywords2019, "^[A-Za-z][-A-Za-z0-9.:_]*$"
	case draft202012:
		only, anchorPattern = keywords2020, "^[A-Za-z_][-A-Za-z0-9._]*$"
	default:
		return nil, false
	}
	props := make(map[string]any, len(keywordsBoth)+len(only))
	for _, kw := range slices.Concat(keywordsBoth, only) {
		props[kw.name] = map[string]any{"$ref": "#/$defs/" + kw.kind}
	}
	defs := valueKinds(anchorPattern)
	defs["keywords"] = map[string]any{"properties": props}
	return map[string]any{
		"$schema": draft202012.meta,
		"title":   "capstan's check of a " + d.name + " schema",
		"type":    []any{"object", "boolean"},
		"$ref":    "#/$defs/keywords",
		"$defs":   defs,
	}, true
}
