package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

// Permission modes, named as Claude Code names them.
const (
	ModeDefault           = "default"
	ModeAcceptEdits       = "acceptEdits"
	ModePlan              = "plan"
	ModeBypassPermissions = "bypassPermissions"
)

// permissionModes lists the valid permission modes.
var permissionModes = []string{ModeDefault, ModeAcceptEdits, ModePlan, ModeBypassPermissions}

// Modes lists the valid permission modes.
// It returns a copy: changing it changes nothing else.
func Modes() []string {
	return slices.Clone(permissionModes)
}

// Policy decides whether a tool call may run. It combines allowedTools and
// disallowedTools patterns with a permission mode:
//
//   - A pattern is a tool name ("Read"), a glob over names ("mcp__github__*",
//     "*"), or a name with an argument rule: "Bash(git log:*)" allows Bash
//     commands that start with "git log", "Bash(go test ./...)" allows exactly
//     that command. For Bash, a prefix rule never matches a command that
//     chains or redirects (";", "&&", "||", "|", "&", ">", "<", "`", "$(",
//     newline), so "Bash(git log:*)" cannot be stretched into "git log; rm -rf".
//     For file tools the rule is a doublestar glob over the path argument,
//     relative to the work dir: "Edit(src/**)", "Read(**/*.md)". A path that
//     leaves the work dir ("../x") never matches a path rule. Rules are
//     lexical: they do not follow symbolic links.
//   - DisallowedTools always wins. A disallowed Bash rule is checked against
//     every simple command of a chained line as well ("ls; rm -rf x" is
//     denied by "Bash(rm:*)"); such deny rules are a convenience, not a
//     security boundary — the sandbox is. A malformed disallowed pattern
//     denies every tool its name part matches (fails closed).
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
	// WorkDir, when set, is the directory path rules are relative to: an
	// absolute path argument inside it is matched by its relative form.
	// Without it an absolute path never matches a path rule.
	WorkDir string
	// Boundary, when set, refuses Bash commands and MCP tool calls that
	// perform GitHub boundary actions (see BoundaryCommand and
	// BoundaryToolCall) whatever else allows them;
	// its text ends the refusal and says why the step may not.
	Boundary string
}

// Decision is the outcome of a policy check.
type Decision struct {
	Allowed bool
	Reason  string // why a call was denied; "" when allowed
}

// ValidateMode reports whether m is a permission mode ("" means default).
func ValidateMode(m string) error {
	if m == "" {
		return nil
	}
	for _, v := range permissionModes {
		if m == v {
			return nil
		}
	}
	return fmt.Errorf("permissionMode %q is not one of %s", m, strings.Join(permissionModes, ", "))
}

// MayUse reports whether some call of t could be allowed. Tools for which it
// is false are not offered to the model at all.
func (p Policy) MayUse(t Tool) bool {
	name := t.Spec().Name
	for _, pat := range p.Disallowed {
		n, _, hasRule, err := tooldecl.SplitPattern(pat)
		if err != nil {
			if nameMatches(malformedName(pat), name) {
				return false
			}
			continue
		}
		if !hasRule && nameMatches(n, name) {
			return false
		}
	}
	explicit := false
	if len(p.Allowed) > 0 {
		any := false
		for _, pat := range p.Allowed {
			if n, _, _, err := tooldecl.SplitPattern(pat); err == nil && nameMatches(n, name) {
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
	arg := &callArgument{p: p, name: name, input: input}
	for _, pat := range p.Disallowed {
		if _, _, _, err := tooldecl.SplitPattern(pat); err != nil {
			if nameMatches(malformedName(pat), name) {
				return Decision{Reason: fmt.Sprintf("%s is denied by malformed disallowedTools pattern %q", name, pat)}
			}
			continue
		}
		if patternMatches(pat, name, arg, true) {
			return Decision{Reason: fmt.Sprintf("%s%s is denied by disallowedTools pattern %q", name, describeArg(arg.get()), pat)}
		}
	}
	if p.Boundary != "" {
		m, ok := BoundaryToolCall(name, input)
		if cmd := arg.get(); name == "Bash" && cmd != nil {
			m, ok = BoundaryCommand(*cmd)
		}
		if ok {
			return Decision{Reason: fmt.Sprintf("%q is a GitHub boundary action (it closes, merges, approves, releases, runs workflows, changes the repository's settings or gh itself, calls the GitHub API, or runs gh code that cannot be checked): %s", m, p.Boundary)}
		}
	}
	explicit := false
	if len(p.Allowed) > 0 {
		for _, pat := range p.Allowed {
			if patternMatches(pat, name, arg, false) {
				explicit = true
				break
			}
		}
		if !explicit {
			return Decision{Reason: fmt.Sprintf("%s%s is not matched by allowedTools %v", name, describeArg(arg.get()), p.Allowed)}
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

// callArgument is the primary argument of one call, read from its input
// the first time a rule (or a message) needs it and then kept: a call that
// only name-only rules match never has its input parsed, and one checked
// against many argument rules has it parsed once.
type callArgument struct {
	p     Policy
	name  string
	input json.RawMessage
	read  bool
	arg   *string
}

// get returns the call's primary argument (Policy.primaryArgument).
func (a *callArgument) get() *string {
	if !a.read {
		a.arg, a.read = a.p.primaryArgument(a.name, a.input), true
	}
	return a.arg
}

func describeArg(arg *string) string {
	if arg == nil {
		return ""
	}
	return fmt.Sprintf("(%s)", *arg)
}

// primaryArgument extracts the argument rules are matched against: Bash's
// command; the path of Read, Write and Edit (file_path), Grep (path, default
// the work dir) and Glob (path joined with the literal prefix of pattern);
// for other tools the first string field of command, file_path, path. nil
// when there is none. Paths are returned relative to the work dir, cleaned;
// a path that cannot be made relative is returned as "/" + cleaned path so
// that no relative rule matches it.
func (p Policy) primaryArgument(name string, input json.RawMessage) *string {
	fields, ok := objectMembers(input)
	if !ok {
		return nil
	}
	// As the tools decode their input (encoding/json into a struct): a
	// key matches its field whatever its case ("Command"), the last
	// member that matches wins, and a null leaves the field as it was.
	str := func(key string) (string, bool) {
		var s string
		found := false
		for _, f := range fields {
			if !strings.EqualFold(f.key, key) || string(f.value) == "null" {
				continue
			}
			if json.Unmarshal(f.value, &s) != nil {
				return "", false
			}
			found = true
		}
		return s, found
	}
	switch name {
	case "Bash":
		if s, ok := str("command"); ok {
			return &s
		}
		return nil
	case "Read", "Write", "Edit":
		if s, ok := str("file_path"); ok {
			rel := p.relPath(s)
			return &rel
		}
		return nil
	case "Grep":
		dir, ok := str("path")
		if !ok || dir == "" {
			dir = "."
		}
		rel := p.relPath(dir)
		return &rel
	case "Glob":
		dir, ok := str("path")
		if !ok || dir == "" {
			dir = "."
		}
		pattern, _ := str("pattern")
		base, _ := doublestar.SplitPattern(filepath.ToSlash(pattern))
		full := base
		if !path.IsAbs(base) {
			full = path.Join(filepath.ToSlash(dir), base)
		}
		rel := p.relPath(full)
		return &rel
	}
	if s, ok := str("command"); ok {
		return &s
	}
	for _, key := range []string{"file_path", "path"} {
		if s, ok := str(key); ok {
			rel := p.relPath(s)
			return &rel
		}
	}
	return nil
}

// member is one member of a JSON object.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers returns the members of the JSON object input in the
// order they are written, duplicates included; false when input is not
// one object.
func objectMembers(input json.RawMessage) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(input))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		out = append(out, member{key, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	return out, true
}

// relPath makes a path argument relative to the work dir, cleaned, with
// every symlink inside the work dir resolved, so that a rule matches the
// file a tool will really touch: with Read(public/**), a link
// public/l -> ../private/x is private/x and is not allowed. Other absolute
// paths, paths that climb out with "..", links that lead outside, and
// dangling or looping links are marked by a leading "/" (no rule matches
// them).
func (p Policy) relPath(arg string) string {
	rel := p.lexicalRel(arg)
	if p.WorkDir == "" || strings.HasPrefix(rel, "/") {
		return rel
	}
	return p.resolveRel(rel)
}

// lexicalRel cleans a path argument relative to the work dir without
// looking at the file system.
func (p Policy) lexicalRel(arg string) string {
	arg = filepath.ToSlash(arg)
	if path.IsAbs(arg) {
		if p.WorkDir != "" {
			if rel, err := filepath.Rel(p.WorkDir, filepath.FromSlash(arg)); err == nil {
				rel = filepath.ToSlash(rel)
				if rel != ".." && !strings.HasPrefix(rel, "../") {
					return path.Clean(rel)
				}
			}
		}
		return path.Clean(arg)
	}
	c := path.Clean(arg)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "/" + c
	}
	return c
}

// resolveRel resolves the symlinks of rel (relative to the work dir) on its
// longest existing prefix and returns the result relative to the resolved
// work dir.
func (p Policy) resolveRel(rel string) string {
	root, err := filepath.EvalSymlinks(p.WorkDir)
	if err != nil {
		return rel // no work dir to resolve against: the lexical answer
	}
	full := filepath.Join(root, filepath.FromSlash(rel))
	resolved, err := EvalSymlinksPrefix(full)
	if err != nil {
		return "/" + filepath.ToSlash(full) // dangling or looping link
	}
	out, err := filepath.Rel(root, resolved)
	if err != nil {
		return "/" + filepath.ToSlash(resolved)
	}
	out = filepath.ToSlash(out)
	if out == ".." || strings.HasPrefix(out, "../") {
		return "/" + filepath.ToSlash(resolved)
	}
	return path.Clean(out)
}

// EvalSymlinksPrefix resolves the symlinks of the absolute path p on its
// longest existing prefix and appends the rest unchanged, so a path that
// does not exist yet resolves through its deepest existing parent. It
// fails on a dangling or looping link in the existing part.
func EvalSymlinksPrefix(p string) (string, error) {
	existing, rest := p, []string(nil)
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = append([]string{filepath.Base(existing)}, rest...)
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{resolved}, rest...)...), nil
}

// malformedName is the tool-name part of a malformed pattern.
func malformedName(p string) string {
	p = strings.TrimSpace(p)
	if i := strings.IndexAny(p, "()"); i >= 0 {
		p = p[:i]
	}
	return strings.TrimSpace(p)
}

func nameMatches(pattern, name string) bool {
	if pattern == name || pattern == "*" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// patternMatches reports whether a call of tool name with argument arg
// matches pattern. deny selects the matching used for disallowedTools.
// The argument is read only when the pattern has a rule for a tool of
// that name.
func patternMatches(pattern, name string, argument *callArgument, deny bool) bool {
	n, rule, hasRule, err := tooldecl.SplitPattern(pattern)
	if err != nil || !nameMatches(n, name) {
		return false
	}
	if !hasRule || rule == "*" {
		return true
	}
	arg := argument.get()
	if arg == nil {
		return false
	}
	if name == "Bash" {
		if deny {
			return bashDenyMatches(rule, *arg)
		}
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
	return bashCommandMatches(rule, command)
}

// bashCommandMatches matches one simple command against a rule: a
// "prefix:*" rule matches the prefix alone or followed by a space; any other
// rule matches the command exactly.
func bashCommandMatches(rule, command string) bool {
	command = strings.TrimSpace(command)
	if prefix, ok := strings.CutSuffix(rule, ":*"); ok {
		prefix = strings.TrimSpace(prefix)
		return command == prefix || strings.HasPrefix(command, prefix+" ") || strings.HasPrefix(command, prefix+"\t")
	}
	return command == strings.TrimSpace(rule)
}

// bashSeparators split a command line into the simple commands a deny rule
// is checked against.
var bashSeparators = []string{"&&", "||", ";", "|", "&", "\n", "\r", "$(", "`", "(", ")", "{", "}"}

// bashDenyMatches reports whether a deny rule matches the command line or
// any simple command in it. Each simple command is also tried without
// leading VAR=value assignments, without common wrappers (sudo, env,
// command, exec, nohup, time, xargs) and with its program's directory
// stripped ("/bin/rm" as "rm").
func bashDenyMatches(rule, command string) bool {
	if bashCommandMatches(rule, command) {
		return true
	}
	segments := []string{command}
	for _, sep := range bashSeparators {
		var next []string
		for _, seg := range segments {
			next = append(next, strings.Split(seg, sep)...)
		}
		segments = next
	}
	for _, seg := range segments {
		words := strings.Fields(seg)
		for len(words) > 0 {
			w := words[0]
			if strings.Contains(w, "=") && !strings.HasPrefix(w, "=") || bashWrappers[w] || strings.HasPrefix(w, "-") || isNumber(w) {
				words = words[1:]
				continue
			}
			break
		}
		if len(words) == 0 {
			continue
		}
		words[0] = path.Base(words[0])
		if bashCommandMatches(rule, strings.Join(words, " ")) {
			return true
		}
	}
	return false
}

var bashWrappers = map[string]bool{"sudo": true, "env": true, "command": true, "exec": true, "nohup": true, "time": true, "xargs": true, "nice": true, "timeout": true}

// pathRuleMatches matches a path argument (already made relative by
// relPath) against a doublestar rule. "dir/**" also matches dir itself.
func pathRuleMatches(rule, p string) bool {
	if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return false // outside the work dir, or not cleaned
	}
	rule = strings.TrimPrefix(rule, "./")
	if dir, ok := strings.CutSuffix(rule, "/**"); ok && p == dir {
		return true
	}
	ok, err := doublestar.Match(rule, p)
	return err == nil && ok
}

func isNumber(w string) bool {
	for _, r := range w {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return w != ""
}
