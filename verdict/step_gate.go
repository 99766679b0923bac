package verdict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// intentAliases are the words models use for the intents.
var intentAliases = map[string]string{
	"continue": agentdir.IntentNext,
	"pass":     agentdir.IntentNext,
	"retry":    agentdir.IntentRepeat,
	"wait":     agentdir.IntentRepeat,
	"fail":     agentdir.IntentRepeat,
	"done":     agentdir.IntentClosing,
	"finished": agentdir.IntentClosing,
}

// Interpretation is what a step's structuredGate read from its structured
// output.
type IntentInterpretation struct {
	// Intent is the intent the step machine routes by.
	Intent string `json:"intent"`
	// Raw is the value found at intentField ("" when none).
	Raw string `json:"raw,omitempty"`
	// Target is the jump target (targetField), for jump.
	Target string `json:"target,omitempty"`
	// Handoff are the handoff values, keyed by their path's last segment.
	Handoff map[string]any `json:"handoff,omitempty"`
	// Fallback is true when the intent could not be read and failFast is
	// false: Intent is the fallback.
	Fallback bool `json:"fallback,omitempty"`
	// Reason is the model's stated reason (next_action.reason, reason or
	// message), or why the fallback was used.
	Reason string `json:"reason,omitempty"`
}

// Interpret reads the intent of step id from its structured output
// through the step's gate: the value at intentField (case-insensitive; the
// aliases continue/pass → next, retry/wait/fail → repeat, done/finished →
// closing), which must be one of allowedIntents. When it is missing or not
// allowed, failFast (the default) is the error STEP_INTENT (the verdict
// stage answers it with a format retry);
// without failFast the fallbackIntent is used (else next when allowed, else
// the first allowed intent). The intent is never read from prose.
func InterpretIntent(id string, g *agentdir.StructuredGate, output json.RawMessage) (IntentInterpretation, error) {
	var doc map[string]any
	if len(bytes.TrimSpace(output)) > 0 {
		_ = json.Unmarshal(output, &doc)
	}
	var in IntentInterpretation
	problem := readIntent(doc, g, &in)
	if problem != "" {
		if g.IsFailFast() {
			e := agenterr.New(agenterr.CodeStepIntent, agenterr.LayerStep, false,
				"step %q: cannot read the intent: %s", id, problem)
			e.Hint = fmt.Sprintf("the answer must be JSON with %s set to one of %v", g.IntentField, g.AllowedIntents)
			return in, e
		}
		in.Fallback, in.Reason = true, problem
		switch {
		case g.FallbackIntent != "" && slices.Contains(g.AllowedIntents, g.FallbackIntent):
			in.Intent = g.FallbackIntent
		case slices.Contains(g.AllowedIntents, agentdir.IntentNext):
			in.Intent = agentdir.IntentNext
		case len(g.AllowedIntents) > 0:
			in.Intent = g.AllowedIntents[0]
		default:
			return in, agenterr.New(agenterr.CodeStepIntent, agenterr.LayerStep, false,
				"step %q: cannot read the intent (%s) and allowedIntents is empty", id, problem)
		}
	}
	if in.Intent == agentdir.IntentJump && g.TargetField != "" {
		if t, ok := lookup(doc, g.TargetField); ok {
			if s, ok := t.(string); ok {
				in.Target = s
			}
		}
	}
	for _, f := range g.HandoffFields {
		v, ok := lookup(doc, f)
		if !ok {
			continue
		}
		if in.Handoff == nil {
			in.Handoff = map[string]any{}
		}
		in.Handoff[f[strings.LastIndex(f, ".")+1:]] = v
	}
	if !in.Fallback {
		for _, p := range []string{"next_action.reason", "reason", "message", "next_action.details.reason"} {
			if v, ok := lookup(doc, p); ok {
				if s, ok := v.(string); ok && s != "" {
					in.Reason = s
					break
				}
			}
		}
	}
	return in, nil
}

// readIntent sets in.Raw and in.Intent from the intent field of doc; it
// returns what is wrong when the field holds no allowed intent.
func readIntent(doc map[string]any, g *agentdir.StructuredGate, in *IntentInterpretation) string {
	raw, found := lookup(doc, g.IntentField)
	switch {
	case doc == nil:
		return "the step gave no structured output (a JSON object)"
	case !found || raw == nil:
		return fmt.Sprintf("no value at %s", g.IntentField)
	default:
		s, ok := raw.(string)
		if !ok {
			return fmt.Sprintf("%s is %s, not a string", g.IntentField, jsonText(raw))
		}
		in.Raw = s
		intent := strings.ToLower(strings.TrimSpace(s))
		if a, ok := intentAliases[intent]; ok {
			intent = a
		}
		switch {
		case !slices.Contains(agentdir.Intents(), intent):
			return fmt.Sprintf("unknown intent %q at %s", s, g.IntentField)
		case !slices.Contains(g.AllowedIntents, intent):
			return fmt.Sprintf("intent %q is not one of allowedIntents %v", intent, g.AllowedIntents)
		default:
			in.Intent = intent
		}
	}
	return ""
}

// lookup returns the value at a dot path ("a.b", "items.0").
func lookup(doc map[string]any, path string) (any, bool) {
	if doc == nil || path == "" {
		return nil, false
	}
	var cur any = doc
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// handoffText is a handoff value as a prompt variable: strings as they
// are, anything else as JSON.
func handoffText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsonText(v)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
