package verify

import (
	"encoding/json"
	"fmt"
	"strings"
)

func decodeParams(raw map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	for k, r := range raw {
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return nil, fmt.Errorf("param %q: %v", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// paramText renders a param value for a command or path: strings as they
// are, other values as compact JSON.
func paramText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// Interpolate replaces ${key} in a shell command with the shell-quoted
// value of params[key], so a value is always one literal word however it
// is written ("$(rm -rf ~)" stays text). Placeholders without a param are
// left for the shell (environment variables such as ${HOME}).
func Interpolate(command string, params map[string]any) string {
	return placeholder().ReplaceAllStringFunc(command, func(m string) string {
		key := m[2 : len(m)-1]
		v, ok := params[key]
		if !ok {
			return m
		}
		return ShellQuote(paramText(v))
	})
}

// InterpolatePlain replaces ${key} with the param's text, unquoted (for
// paths, which never reach a shell).
func InterpolatePlain(s string, params map[string]any) string {
	return placeholder().ReplaceAllStringFunc(s, func(m string) string {
		v, ok := params[m[2:len(m)-1]]
		if !ok {
			return m
		}
		return paramText(v)
	})
}

// ShellQuote quotes s as one POSIX shell word.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
