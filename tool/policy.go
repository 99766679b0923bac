package tool

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Permission modes, named as Claude Code names them.
const (
	ModeDefault           = "default"
	ModeAcceptEdits       = "acceptEdits"
	ModePlan              = "plan"
	ModeBypassPermissions = "bypassPermissions"
)

// Modes lists the valid permission modes.
var Modes = []string{ModeDefault, ModeAcceptEdits, ModePlan, ModeBypassPermissions}

// Policy decides whether a tool call may run. It combines allowedTools and
// disallowedTools patterns with a permission mode:
//
//   - A pattern is a tool name ("Read"), a glob over names ("mcp__github__*",
//     "*"), or a name with an argument rule: "Bash(git log:*)" allows Bash
//     commands that start with "git log", "Bash(go test ./...)" allows exactly
//     that command. For Bash, a prefix rule never matches a command that
//     chains or redirects (";", "&&", "||", "|", "&", ">", "<", "`", "$(",
//     newline), so "Bash(git log:*)" cannot be stretched into "git log; rm -rf".
//     For file tools the rule is a glob over the path argument:
//     "Edit(src/**)".
//   - DisallowedTools always wins.
//   - If Allowed is non-empty, a call must match one of its patterns.
//   - The mode then limits tool kinds: plan allows only read tools; default
//     allows read tools, and edit or execute tools only when an allowed
//     pattern names them (capstan never prompts, so "ask" means deny);
//     acceptEdits allows read and edit tools, and execute tools only when an
//     allowed pattern names them; bypassPermissions allows every kind.
//
// The zero Policy is mode default with no patterns: read tools only.
type Policy struct {
	Allowed    []string
	Disallowed []string
	Mode       string
}

// Decision is the outcome of a policy check.
type Decision struct {
	Allowed bool
	Reason  string // why a call was denied; "" when allowed
}

// ValidatePattern reports whether p is a well-formed tool pattern.
func ValidatePattern(p string) error {
	name, rule, hasRule, err := splitPattern(p)
	if err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("tool pattern %q has no tool name", p)
	}
	if _, err := path.Match(name, ""); err != nil {
		return fmt.Errorf("tool pattern %q: bad glob: %v", p, err)
	}
	if hasRule && rule == "" {
		return fmt.Errorf("tool pattern %q has an empty argument rule", p)
	}
	return nil
}

func splitPattern(p string) (name, rule string, hasRule bool, err error) {
	p = strings.TrimSpace(p)
	i := strings.IndexByte(p, '(')
	if i < 0 {
		if strings.ContainsRune(p, ')') {
			return "", "", false, fmt.Errorf("tool pattern %q has ')' without '('", p)
		}
		return p, "", false, nil
	}
	if !strings.HasSuffix(p, ")") {
		return "", "", false, fmt.Errorf("tool pattern %q: argument rule must end with ')'", p)
	}
	return p[:i], p[i+1 : len(p)-1], true, nil
}

// MayUse reports whether some call of t could be allowed. Tools for which it
// is false are not offered to the model at all.
func (p Policy) MayUse(t Tool) bool {
	name := t.Spec().Name
	for _, pat := range p.Disallowed {
		if n, _, hasRule, err := splitPattern(pat); err == nil && !hasRule && nameMatches(n, name) {
			return false
		}
	}
	explicit := false
	if len(p.Allowed) > 0 {
		any := false
		for _, pat := range p.Allowed {
			if n, _, _, err := splitPattern(pat); err == nil && nameMatches(n, name) {
				any = true
				explicit = true
			}
		}
		if !any {
			return false
		}
	}
	return p.kindAllowed(t.Kind(), explicit)
}

// Decide checks one call of t with the given input.
func (p Policy) Decide(t Tool, input json.RawMessage) Decision {
	name := t.Spec().Name
	arg := primaryArgument(name, input)
	for _, pat := range p.Disallowed {
		if patternMatches(pat, name, arg) {
			return Decision{Reason: fmt.Sprintf("%s is denied by disallowedTools pattern %q", name, pat)}
		}
	}
	explicit := false
	if len(p.Allowed) > 0 {
		for _, pat := range p.Allowed {
			if patternMatches(pat, name, arg) {
				explicit = true
				break
			}
		}
		if !explicit {
			return Decision{Reason: fmt.Sprintf("%s%s is not matched by allowedTools %v", name, describeArg(arg), p.Allowed)}
		}
	}
	if !p.kindAllowed(t.Kind(), explicit) {
		return Decision{Reason: fmt.Sprintf("permissionMode %q does not allow %s tool %s; list it in allowedTools or change permissionMode", p.mode(), t.Kind(), name)}
	}
	return Decision{Allowed: true}
}

func (p Policy) mode() string {
	if p.Mode == "" {
		return ModeDefault
	}
	return p.Mode
}

func (p Policy) kindAllowed(k Kind, explicit bool) bool {
	switch p.mode() {
	case ModeBypassPermissions:
		return true
	case ModePlan:
		return k == KindRead
	case ModeAcceptEdits:
		return k == KindRead || k == KindEdit || explicit
	default:
		return k == KindRead || explicit
	}
}

func describeArg(arg *string) string {
	if arg == nil {
		return ""
	}
	return fmt.Sprintf("(%s)", *arg)
}

// primaryArgument extracts the argument rules are matched against: Bash's
// command, a file tool's path. nil when the tool has none.
func primaryArgument(name string, input json.RawMessage) *string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) != nil {
		return nil
	}
	for _, key := range []string{"command", "file_path", "path", "pattern"} {
		if raw, ok := fields[key]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return &s
			}
		}
	}
	return nil
}

func nameMatches(pattern, name string) bool {
	if pattern == name || pattern == "*" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

func patternMatches(pattern, name string, arg *string) bool {
	n, rule, hasRule, err := splitPattern(pattern)
	if err != nil || !nameMatches(n, name) {
		return false
	}
	if !hasRule || rule == "*" {
		return true
	}
	if arg == nil {
		return false
	}
	if name == "Bash" {
		return bashRuleMatches(rule, *arg)
	}
	return pathRuleMatches(rule, *arg)
}

// shellControl are sequences that let a command do more than its prefix says.
var shellControl = []string{";", "&", "|", ">", "<", "`", "$(", "\n", "\r"}

func bashRuleMatches(rule, command string) bool {
	command = strings.TrimSpace(command)
	for _, c := range shellControl {
		if strings.Contains(command, c) {
			return false
		}
	}
	if prefix, ok := strings.CutSuffix(rule, ":*"); ok {
		return command == prefix || strings.HasPrefix(command, prefix+" ")
	}
	return command == rule
}

func pathRuleMatches(rule, p string) bool {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	rule = strings.TrimPrefix(rule, "./")
	if strings.HasSuffix(rule, "/**") {
		dir := strings.TrimSuffix(rule, "/**")
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	ok, err := path.Match(rule, p)
	return err == nil && ok
}
