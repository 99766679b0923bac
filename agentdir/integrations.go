package agentdir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/capstan-dev/capstan/internal/lazyre"
)

// Closure actions (runner.integrations.github.defaultClosureAction and a
// closure step's "closure_action" output).
const (
	ClosureClose         = "close"
	ClosureLabelOnly     = "label-only"
	ClosureLabelAndClose = "label-and-close"
)

// closureActions lists the valid closure actions.
var closureActions = []string{ClosureClose, ClosureLabelOnly, ClosureLabelAndClose}

// ClosureActions lists the valid closure actions.
// It returns a copy: changing it changes nothing else.
func ClosureActions() []string {
	return slices.Clone(closureActions)
}

// Integrations is runner.integrations.
type Integrations struct {
	GitHub *GitHub `json:"github,omitempty"`
}

// GitHub is runner.integrations.github: what capstan does to the run's
// GitHub issue (the "issue" parameter) after the run completed verified.
type GitHub struct {
	// Enabled turns the integration on; false keeps capstan away from
	// GitHub (no label or close calls, no closure prompt adaptation).
	Enabled bool `json:"enabled"`
	// Labels name labels; only Completion acts (see GitHubLabels).
	Labels GitHubLabels `json:"labels,omitzero"`
	// DefaultClosureAction is close | label-only | label-and-close: what
	// happens to the issue when the run completes, unless the closing
	// step's output says otherwise ("closure_action").
	DefaultClosureAction string `json:"defaultClosureAction,omitempty"`
}

// On reports whether the integration is configured and enabled.
func (g *GitHub) On() bool { return g != nil && g.Enabled }

// GitHubLabels is runner.integrations.github.labels: Completion lists the
// labels added and removed when the run completes; every other key names
// one label for people and prompts (requirements, inProgress, blocked,
// review, …) and has no effect of its own.
type GitHubLabels struct {
	Completion *LabelChange
	Named      map[string]string
}

// LabelChange is a set of labels to add and to remove.
type LabelChange struct {
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// IsZero reports whether no label is configured.
func (l GitHubLabels) IsZero() bool { return l.Completion == nil && len(l.Named) == 0 }

// UnmarshalJSON reads "completion" as a LabelChange and every other key as
// a label name; a value of the wrong type is left out (the schema reports
// it, and Validate refuses the file).
func (l *GitHubLabels) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := typeMismatchTolerated(json.Unmarshal(b, &raw)); err != nil {
		return err
	}
	*l = GitHubLabels{}
	var out GitHubLabels
	for k, v := range raw {
		if k == "completion" {
			var c LabelChange
			if err := json.Unmarshal(v, &c); err != nil {
				if err := typeMismatchTolerated(err); err != nil {
					return fmt.Errorf("labels.completion: %w", err)
				}
				continue
			}
			out.Completion = &c
			continue
		}
		var name string
		if err := json.Unmarshal(v, &name); err != nil {
			if err := typeMismatchTolerated(err); err != nil {
				return fmt.Errorf("labels.%s: %w", k, err)
			}
			continue
		}
		if out.Named == nil {
			out.Named = map[string]string{}
		}
		out.Named[k] = name
	}
	*l = out
	return nil
}

// MarshalJSON writes the labels back in agent.json's form.
func (l GitHubLabels) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(l.Named))
	for k := range l.Named {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteByte('{')
	sep := ""
	if l.Completion != nil {
		c, err := json.Marshal(l.Completion)
		if err != nil {
			return nil, err
		}
		buf.WriteString(`"completion":`)
		buf.Write(c)
		sep = ","
	}
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(l.Named[k])
		buf.WriteString(sep)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
		sep = ","
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// StepRunner is a subprocess step's command: Command runs with Args (no
// shell), in the work dir, for at most Timeout milliseconds (0 = 30 s).
// "${context.NAME}" in an argument is replaced by the run's value of
// parameter NAME.
type StepRunner struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	Timeout int      `json:"timeout,omitempty"`
}

// contextRef finds ${context.NAME} in a subprocess argument.
var contextRef = lazyre.New(`\$\{context\.([^}]*)\}`)

// ContextRefs returns the parameter names an argument refers to with
// ${context.NAME}, in order (names trimmed of spaces).
func ContextRefs(arg string) []string {
	var out []string
	for _, m := range contextRef().FindAllStringSubmatch(arg, -1) {
		out = append(out, trimSpace(m[1]))
	}
	return out
}

// ExpandContext replaces every ${context.NAME} in arg with value(NAME);
// ok is false (and missing the first name) when value has none.
func ExpandContext(arg string, value func(name string) (string, bool)) (out string, missing string, ok bool) {
	ok = true
	out = contextRef().ReplaceAllStringFunc(arg, func(m string) string {
		name := trimSpace(contextRef().FindStringSubmatch(m)[1])
		v, found := value(name)
		if !found && ok {
			ok, missing = false, name
		}
		return v
	})
	return out, missing, ok
}

func trimSpace(s string) string {
	return string(bytes.TrimSpace([]byte(s)))
}
