package schema

// The resolved schema is one 2020-12 document: a provider reads it as
// 2020-12, and so does capstan's check of the answer. A schema file of an
// earlier draft is rewritten into the 2020-12 form of what it means as it
// is inlined, so that both read it as its own draft would.

// notInDraft lists, for each earlier draft, the keywords of later drafts
// that it does not define. A validator of that draft ignores them as
// unknown keywords, so the resolver drops them rather than let 2020-12
// enforce them.
var notInDraft = map[*draft]map[string]bool{
	draft4: {"const": true, "contains": true, "propertyNames": true, "if": true, "then": true, "else": true,
		"prefixItems": true, "dependentRequired": true, "dependentSchemas": true, "unevaluatedProperties": true,
		"unevaluatedItems": true, "minContains": true, "maxContains": true},
	draft6: {"if": true, "then": true, "else": true,
		"prefixItems": true, "dependentRequired": true, "dependentSchemas": true, "unevaluatedProperties": true,
		"unevaluatedItems": true, "minContains": true, "maxContains": true},
	draft7: {"prefixItems": true, "dependentRequired": true, "dependentSchemas": true, "unevaluatedProperties": true,
		"unevaluatedItems": true, "minContains": true, "maxContains": true},
	draft201909: {"prefixItems": true, "dependencies": true},
}

// modernize returns the resolved schema object o, written in a file of
// draft d, in its 2020-12 form:
//   - an array form of items (a tuple) becomes prefixItems, and
//     additionalItems becomes items; additionalItems next to a single
//     items schema, which has no effect, is dropped;
//   - dependencies (drafts 4 to 7) splits into dependentRequired (lists of
//     names) and dependentSchemas (schemas);
//   - draft-04's boolean exclusiveMaximum and exclusiveMinimum become the
//     numeric ones, and its id is dropped like $id;
//   - keywords d does not define are dropped (see notInDraft).
//
// o is returned as it is for 2020-12 (or d nil).
func modernize(o *object, d *draft) *object {
	if d == nil || d == draft202012 {
		return o
	}
	drop := notInDraft[d]
	items, _ := o.get("items")
	_, tuple := items.([]any)
	exclusive := func(k string) bool {
		b, ok := o.vals[k].(bool)
		return d == draft4 && ok && b
	}
	out := newObject(o.len())
	var required, schemas *object
	for _, k := range o.keys {
		v := o.vals[k]
		switch {
		case drop[k]:
		case k == "items" && tuple:
			out.set("prefixItems", v)
		case k == "additionalItems":
			if tuple {
				out.set("items", v)
			}
		case k == "dependencies":
			m, ok := v.(*object)
			if !ok {
				out.set(k, v)
				continue
			}
			for _, pk := range m.keys {
				if names, isList := m.vals[pk].([]any); isList {
					if required == nil {
						required = newObject(m.len())
						out.set("dependentRequired", required)
					}
					required.set(pk, names)
					continue
				}
				if schemas == nil {
					schemas = newObject(m.len())
					out.set("dependentSchemas", schemas)
				}
				schemas.set(pk, m.vals[pk])
			}
		case d == draft4 && k == "id":
		case d == draft4 && (k == "exclusiveMaximum" || k == "exclusiveMinimum"):
			if _, isBool := v.(bool); !isBool {
				out.set(k, v)
			}
		case k == "maximum" && exclusive("exclusiveMaximum"):
			out.set("exclusiveMaximum", v)
		case k == "minimum" && exclusive("exclusiveMinimum"):
			out.set("exclusiveMinimum", v)
		default:
			out.set(k, v)
		}
	}
	return out
}
