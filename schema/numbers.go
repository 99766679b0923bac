package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// maxNumberSize bounds a JSON number's digits plus the size of its
// exponent. The library compares numbers exactly, as fractions: a number
// such as 1e-999999 takes minutes to compare, where every number a real
// value or schema holds is far inside the bound.
const maxNumberSize = 10000

// oversized reports whether n is beyond maxNumberSize.
func oversized(n json.Number) bool {
	s := string(n)
	if len(s) > maxNumberSize {
		return true
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return false
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	if err != nil {
		return true // an exponent too large for an int
	}
	if exp < 0 {
		exp = -exp
	}
	return exp > maxNumberSize-len(s)
}

// oversizedNumbers returns a failure for each number in v beyond
// maxNumberSize, located at its place in v (reference tokens after at).
func oversizedNumbers(v any, at []string) []Failure {
	switch x := v.(type) {
	case json.Number:
		if oversized(x) {
			shown := string(x)
			if len(shown) > 24 {
				shown = shown[:20] + "..."
			}
			return []Failure{{Keyword: "type", Instance: append([]string(nil), at...), Value: x,
				Message: fmt.Sprintf("number %s is too large or too precise to compare (its digits and exponent exceed %d); use a number of ordinary size", shown, maxNumberSize)}}
		}
	case []any:
		var out []Failure
		for i, e := range x {
			out = append(out, oversizedNumbers(e, append(at, strconv.Itoa(i)))...)
		}
		return out
	case map[string]any:
		var out []Failure
		for _, k := range slices.Sorted(maps.Keys(x)) {
			out = append(out, oversizedNumbers(x[k], append(at, k))...)
		}
		return out
	}
	return nil
}

// checkNumbers refuses a schema document holding a number beyond
// maxNumberSize, before anything compares it.
func checkNumbers(doc any) error {
	if fails := oversizedNumbers(doc, nil); len(fails) > 0 {
		return fmt.Errorf("not a usable JSON Schema: %s", joinProblems(problemLines(fails)))
	}
	return nil
}
