package agentdir

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func isNumber(s string) bool {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil && !isInfOrNaN(f)
}

func isInfOrNaN(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// defaultString renders a parameter's JSON default as the string a CLI
// value would be, or returns a phrase saying why it does not match Type.
func defaultString(p Parameter) (string, string) {
	var v any
	if err := json.Unmarshal(p.Default, &v); err != nil {
		return "", "is not valid JSON"
	}
	switch p.Type {
	case "string":
		if s, ok := v.(string); ok {
			return s, ""
		}
		return "", fmt.Sprintf("must be a string, got %s", string(p.Default))
	case "number":
		if _, ok := v.(float64); ok {
			return strings.TrimSpace(string(p.Default)), ""
		}
		return "", fmt.Sprintf("must be a number, got %s", string(p.Default))
	case "boolean":
		if b, ok := v.(bool); ok {
			return strconv.FormatBool(b), ""
		}
		return "", fmt.Sprintf("must be true or false, got %s", string(p.Default))
	}
	return "", fmt.Sprintf("cannot be checked: unknown type %q", p.Type)
}

// checkParamValue checks one string value against p's type and validation
// and returns "" or what is wrong.
func checkParamValue(p Parameter, v string) string {
	switch p.Type {
	case "number":
		if !isNumber(v) {
			return fmt.Sprintf("%q is not a number", v)
		}
	case "boolean":
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Sprintf("%q is not true or false", v)
		}
	}
	val := p.Validation
	if val == nil {
		return ""
	}
	if p.Type == "number" {
		f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if val.Min != nil && f < *val.Min {
			return fmt.Sprintf("%s is less than the minimum %v", v, *val.Min)
		}
		if val.Max != nil && f > *val.Max {
			return fmt.Sprintf("%s is greater than the maximum %v", v, *val.Max)
		}
	}
	if val.Pattern != "" && p.Type == "string" {
		re, err := regexp.Compile(`^(?:` + val.Pattern + `)$`)
		if err != nil {
			return fmt.Sprintf("pattern %q does not compile", val.Pattern)
		}
		if !re.MatchString(v) {
			return fmt.Sprintf("%q does not match the pattern %q", v, val.Pattern)
		}
	}
	if len(val.Enum) > 0 && p.Type != "boolean" {
		ok := slices.Contains(val.Enum, v)
		if !ok && p.Type == "number" {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			for _, e := range val.Enum {
				if g, err := strconv.ParseFloat(strings.TrimSpace(e), 64); err == nil && g == f {
					ok = true
				}
			}
		}
		if !ok {
			return fmt.Sprintf("%q is not one of %s", v, strings.Join(val.Enum, ", "))
		}
	}
	return ""
}
