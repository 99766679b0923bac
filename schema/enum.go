package schema

import (
	"encoding/json"
	"strings"
)

// EnumAt returns the string values of the enum found at pointer ("#/a/b",
// a JSON pointer into schema) and whether there is one. Where a key is
// missing, the members of an allOf at that level are searched (a resolved
// schema has its allOf merged, but a member may stay unmerged under
// if/then). A "const" counts as a one-value enum.
func EnumAt(schema json.RawMessage, pointer string) ([]string, bool) {
	var root any
	if json.Unmarshal(schema, &root) != nil {
		return nil, false
	}
	p, ok := strings.CutPrefix(pointer, "#")
	if !ok {
		return nil, false
	}
	var tokens []string
	if p != "" {
		if !strings.HasPrefix(p, "/") {
			return nil, false
		}
		for _, t := range strings.Split(p[1:], "/") {
			tokens = append(tokens, strings.NewReplacer("~1", "/", "~0", "~").Replace(t))
		}
	}
	node, ok := walk(root, tokens, 0)
	if !ok {
		return nil, false
	}
	m, _ := node.(map[string]any)
	var vals []any
	if e, has := m["enum"].([]any); has {
		vals = e
	} else if c, has := m["const"]; has {
		vals = []any{c}
	} else {
		return nil, false
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out, true
}

func walk(node any, tokens []string, depth int) (any, bool) {
	if len(tokens) == 0 {
		return node, true
	}
	if depth > 64 {
		return nil, false
	}
	m, ok := node.(map[string]any)
	if !ok {
		return nil, false
	}
	if next, ok := m[tokens[0]]; ok {
		if found, ok := walk(next, tokens[1:], depth+1); ok {
			return found, true
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		for _, member := range all {
			if found, ok := walk(member, tokens, depth+1); ok {
				return found, true
			}
		}
	}
	return nil, false
}
