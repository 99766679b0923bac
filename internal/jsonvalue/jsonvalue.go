// Package jsonvalue is capstan's one place for JSON values: where each
// value of a JSON text is, by JSON pointer (Index, for problems reported
// as file:line:col), and Go values as the JSON-shaped values
// (map[string]any, []any, string, float64, bool, nil) that the two
// template evaluators walk without reflection: Normalize, the truth they
// share (Truthy) and the budget they walk under (Budget, ErrBudget).
package jsonvalue

import "encoding/json"

// Normalize returns v as JSON-shaped values, so templates address struct
// fields by their JSON names. Values that already are JSON-shaped scalars
// are returned as is; a value that cannot be marshalled becomes nil.
func Normalize(v any) any {
	switch v.(type) {
	case nil, string, float64, bool:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// Truthy is the truth both template languages share for JSON values: nil,
// false, "", 0 and empty lists and objects are false; anything else is
// true.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}
