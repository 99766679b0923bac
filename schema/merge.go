package schema

import (
	"encoding/json"
	"fmt"

	"github.com/capstan-dev/capstan/agenterr"
)

// Keywords merged by a rule other than "must be equal".
var (
	// annotations: the last member that sets one wins (the schema that
	// inherits describes itself, not its base).
	annotationKeywords = map[string]bool{
		"title": true, "description": true, "$comment": true, "default": true,
		"examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	}
	// lower bounds: the largest wins.
	lowerBoundKeywords = map[string]bool{
		"minimum": true, "exclusiveMinimum": true, "minLength": true,
		"minItems": true, "minProperties": true, "minContains": true,
	}
	// upper bounds: the smallest wins.
	upperBoundKeywords = map[string]bool{
		"maximum": true, "exclusiveMaximum": true, "maxLength": true,
		"maxItems": true, "maxProperties": true, "maxContains": true,
	}
)

// mergeAll merges resolved allOf members, in order, into one schema. A
// member true is ignored; a member false makes the result false. The
// conditionals of the members (if/then/else) are not merged keyword by
// keyword, which would pair one member's "if" with another's "then": when
// more than one member has one, each stays whole in the result's allOf.
func mergeAll(members []any, file, loc string) (any, error) {
	out := newObject(8)
	var conds []any
	for _, m := range members {
		switch x := m.(type) {
		case bool:
			if !x {
				return false, nil
			}
		case *object:
			rest, cond := splitConditional(x)
			if cond != nil {
				conds = append(conds, cond)
			}
			if err := mergeInto(out, rest, file, loc); err != nil {
				return nil, err
			}
		default:
			return nil, resErr(file, loc+"/allOf", "allOf member is a %s, not a schema", kindOf(m))
		}
	}
	switch {
	case len(conds) == 1:
		c := conds[0].(*object)
		for _, k := range c.keys {
			out.set(k, c.vals[k])
		}
	case len(conds) > 1:
		all := conds
		if prev, ok := out.get("allOf"); ok {
			if a, isArr := prev.([]any); isArr {
				all = append(append([]any(nil), a...), conds...)
			}
		}
		out.set("allOf", all)
	}
	return out, nil
}

// splitConditional returns s without if/then/else and, when s has an
// "if", those three keywords as a schema of their own (nil otherwise).
func splitConditional(s *object) (*object, *object) {
	if _, ok := s.get("if"); !ok {
		return s, nil
	}
	rest, cond := newObject(s.len()), newObject(3)
	for _, k := range s.keys {
		switch k {
		case "if", "then", "else":
			cond.set(k, s.vals[k])
		default:
			rest.set(k, s.vals[k])
		}
	}
	return rest, cond
}

// mergeInto merges schema b into a.
func mergeInto(a, b *object, file, loc string) error {
	for _, k := range b.keys {
		bv := b.vals[k]
		av, ok := a.get(k)
		if !ok {
			a.set(k, bv)
			continue
		}
		if equalJSON(av, bv) {
			continue
		}
		merged, err := mergeKeyword(k, av, bv, file, loc)
		if err != nil {
			return err
		}
		a.set(k, merged)
	}
	return nil
}

func conflict(file, loc, k string, a, b any) *agenterr.Error {
	return hint(resErr(file, loc, "allOf members disagree on %q (%s vs %s)", k, short(a), short(b)),
		"make the members agree, or move the keyword into one member only")
}

// short renders a value for an error message.
func short(v any) string {
	var b []byte
	switch x := v.(type) {
	case *object:
		b = []byte(fmt.Sprintf("object with %d keys", x.len()))
	default:
		b, _ = json.Marshal(plain(v))
	}
	if len(b) > 60 {
		b = append(b[:57], "..."...)
	}
	return string(b)
}

// plain converts a decoded value into encoding/json's generic form.
func plain(v any) any {
	switch x := v.(type) {
	case *object:
		m := make(map[string]any, x.len())
		for _, k := range x.keys {
			m[k] = plain(x.vals[k])
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = plain(e)
		}
		return a
	default:
		return v
	}
}

func mergeKeyword(k string, av, bv any, file, loc string) (any, error) {
	switch {
	case annotationKeywords[k]:
		return bv, nil
	case lowerBoundKeywords[k], upperBoundKeywords[k]:
		return tighterBound(k, av, bv, file, loc)
	}
	switch k {
	case "properties", "patternProperties", "dependentSchemas":
		return mergeProperties(k, av, bv, file, loc)
	case "required":
		aa, aok := av.([]any)
		ba, bok := bv.([]any)
		if !aok || !bok {
			return nil, conflict(file, loc, k, av, bv)
		}
		out := append([]any(nil), aa...)
		for _, e := range ba {
			if !containsJSON(out, e) {
				out = append(out, e)
			}
		}
		return out, nil
	case "type":
		return mergeTypes(av, bv, file, loc)
	case "enum":
		aa, aok := av.([]any)
		ba, bok := bv.([]any)
		if !aok || !bok {
			return nil, conflict(file, loc, k, av, bv)
		}
		var both []any
		for _, e := range aa {
			if containsJSON(ba, e) {
				both = append(both, e)
			}
		}
		if len(both) == 0 {
			return nil, hint(resErr(file, loc, "allOf members have disjoint enums %s and %s", short(av), short(bv)),
				"no value can satisfy both; fix the enums")
		}
		return both, nil
	case "items", "additionalProperties", "propertyNames", "contains", "unevaluatedItems":
		// Both members constrain the same subschema: it must satisfy both.
		return mergeAll([]any{av, bv}, file, loc+"/"+k)
	case "anyOf", "oneOf":
		// Two alternatives lists cannot be expressed as one without
		// changing meaning.
		return nil, conflict(file, loc, k, av, bv)
	}
	return nil, conflict(file, loc, k, av, bv)
}

// tighterBound is the tighter of two bounds of keyword k: the larger
// lower bound, the smaller upper bound.
func tighterBound(k string, av, bv any, file, loc string) (any, error) {
	an, aok := av.(json.Number)
	bn, bok := bv.(json.Number)
	if !aok || !bok {
		return nil, conflict(file, loc, k, av, bv)
	}
	af, err1 := an.Float64()
	bf, err2 := bn.Float64()
	if err1 != nil || err2 != nil {
		return nil, conflict(file, loc, k, av, bv)
	}
	if lowerBoundKeywords[k] == (bf > af) {
		return bv, nil
	}
	return av, nil
}

// mergeProperties merges two maps of subschemas (properties,
// patternProperties, dependentSchemas): a name both have gets the merge of
// its two schemas.
func mergeProperties(k string, av, bv any, file, loc string) (any, error) {
	am, aok := av.(*object)
	bm, bok := bv.(*object)
	if !aok || !bok {
		return nil, conflict(file, loc, k, av, bv)
	}
	out := newObject(am.len() + bm.len())
	for _, pk := range am.keys {
		out.set(pk, am.vals[pk])
	}
	for _, pk := range bm.keys {
		pb := bm.vals[pk]
		pa, ok := out.get(pk)
		if !ok || equalJSON(pa, pb) {
			out.set(pk, pb)
			continue
		}
		merged, err := mergeAll([]any{pa, pb}, file, loc+"/"+k+"/"+escapeToken(pk))
		if err != nil {
			return nil, err
		}
		out.set(pk, merged)
	}
	return out, nil
}

// mergeTypes is the types both members allow (integer where one allows
// number and the other integer); none is an error.
func mergeTypes(av, bv any, file, loc string) (any, error) {
	const k = "type"
	at, aok := typeSet(av)
	bt, bok := typeSet(bv)
	if !aok || !bok {
		return nil, conflict(file, loc, k, av, bv)
	}
	var both []any
	for _, t := range at {
		switch {
		case containsJSON(bt, t):
		case t == "integer" && containsJSON(bt, "number"), t == "number" && containsJSON(bt, "integer"):
			t = "integer" // integers are the numbers both allow
		default:
			continue
		}
		if !containsJSON(both, t) {
			both = append(both, t)
		}
	}
	switch len(both) {
	case 0:
		return nil, hint(resErr(file, loc, "allOf members have conflicting types %s and %s", short(av), short(bv)),
			"an instance cannot be of both types; fix the members' \"type\"")
	case 1:
		return both[0], nil
	default:
		return both, nil
	}
}

// typeSet returns a "type" value as a list of type names.
func typeSet(v any) ([]any, bool) {
	switch x := v.(type) {
	case string:
		return []any{x}, true
	case []any:
		for _, e := range x {
			if _, ok := e.(string); !ok {
				return nil, false
			}
		}
		return x, true
	}
	return nil, false
}

func containsJSON(list []any, v any) bool {
	for _, e := range list {
		if equalJSON(e, v) {
			return true
		}
	}
	return false
}
