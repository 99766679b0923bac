package tool

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ghBoundary is the one list of gh commands a run may not run: each is
// gh's command words ("issue", "close"; a word may list alternatives,
// "ext|extension|extensions") and, when only some uses are refused, a
// regular expression the rest of the command must match (it stops at the
// next ;, &, | or newline). They close,
// delete, transfer, reopen or approve issues and pull requests, publish or
// change releases, start, cancel or re-run workflows, change the
// repository's settings, secrets or access, change gh itself (its login,
// configuration, extensions and aliases, which could give any of them a
// new name, and the account's keys), or call the API directly (which can
// do all of that). Both BoundaryCommand and BoundaryDenyPatterns are made
// from it.
var ghBoundary = []struct {
	words []string
	rest  string
}{
	{words: []string{"issue", "close"}},
	{words: []string{"issue", "delete"}},
	{words: []string{"issue", "transfer"}},
	{words: []string{"issue", "reopen"}},
	{words: []string{"issue", "edit"}, rest: `[^;&|\n]*--state[\s=]+closed`},
	{words: []string{"pr", "close"}},
	{words: []string{"pr", "merge"}},
	{words: []string{"pr", "ready"}},
	{words: []string{"pr", "reopen"}},
	// An approval can satisfy the review a merge waits for; a comment or a
	// request for changes cannot.
	{words: []string{"pr", "review"}, rest: `[^;&|\n]*(?:\s--approve\b|\s-[A-Za-z]*a)`},
	{words: []string{"release", "create|edit|delete|delete-asset|upload"}},
	{words: []string{"workflow", "run|enable|disable"}},
	{words: []string{"run", "rerun|cancel|delete"}},
	{words: []string{"repo", "delete|archive|unarchive|rename|edit"}},
	{words: []string{"repo", "deploy-key", "add|delete"}},
	{words: []string{"secret", "set|delete|remove"}},
	{words: []string{"variable", "set|delete|remove"}},
	{words: []string{"label", "delete"}},
	{words: []string{"auth", "login|logout|refresh|switch|token|setup-git"}},
	{words: []string{"auth", "status"}, rest: `[^;&|\n]*(?:\s--show-token\b|\s-[A-Za-z]*t)`},
	{words: []string{"config", "set"}},
	{words: []string{"ssh-key|gpg-key", "add|delete"}},
	{words: []string{"extension|extensions|ext", "install|upgrade|exec"}},
	{words: []string{"alias", "set|import"}},
	{words: []string{"api"}},
}

// ghCommands are gh's own top-level commands (and their aliases and help
// topics). Any other first word runs an installed extension or a user's
// alias, which can do anything: such a gh call is refused.
var ghCommands = []string{
	"a11y", "accessibility", "actions", "agent-task", "alias", "api", "attestation", "auth", "browse",
	"cache", "codespace", "completion", "config", "credits", "cs", "environment", "exit-codes", "ext",
	"extension", "extensions", "formatting", "gist", "gpg-key", "help", "issue", "label", "mintty",
	"org", "pr", "preview", "project", "reference", "release", "repo", "rs", "ruleset", "run",
	"search", "secret", "ssh-key", "status", "variable", "version", "workflow",
}

// ghFlags are flags (and their values) gh accepts before and between its
// command words ("gh -R o/r issue close 1", "gh issue -R o/r close 1").
const ghFlags = `(?:\s+-\S+(?:\s+[^-\s]\S*)?)*`

// ghWords is ghBoundary as one regular expression: the command words
// after gh (and its flags) of every refused gh command.
func ghWords() string {
	rules := make([]string, len(ghBoundary))
	for i, r := range ghBoundary {
		words := make([]string, len(r.words))
		for j, w := range r.words {
			words[j] = "(?:" + w + ")"
		}
		rules[i] = strings.Join(words, ghFlags+`\s+`) + `\b` + r.rest
	}
	return ghFlags + `\s+(?:` + strings.Join(rules, "|") + `)`
}

// ghRule matches a refused gh command at a "gh" of the command line
// (boundaryMatch tries it at every one, which keeps a long line fast).
var ghRule = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^gh` + ghWords()) })

// computedGH matches a refused gh command whose program the shell
// computes ("$GH pr merge", "$(which gh) pr merge", a backquote).
var computedGH = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[;&|(){}\n\x60])\s*((?:(?:\w+=[^\s;&|]*|env|command|exec|eval|nohup|time|sudo)\s+)*` +
		`(?:\$\{[^}]*\}|\$\([^)]*\)|\$\w+|\x60[^\x60]*\x60)` + ghWords() + `)`)
})

// lineRules find HTTP clients and JSON payloads aimed at the GitHub API,
// and shell aliases that give gh another name; each needs its literal in
// the line.
var lineRules = sync.OnceValue(func() []struct {
	literal string
	re      *regexp.Regexp
} {
	return []struct {
		literal string
		re      *regexp.Regexp
	}{
		{"api.github.com", regexp.MustCompile(`\b(?:curl|wget|python[23]?|node|ruby|perl|deno)\b.*api\.github\.com`)},
		{"closed", regexp.MustCompile(`"state"\s*:\s*"closed"`)},
		{"closed", regexp.MustCompile(`'state'\s*:\s*'closed'`)},
		{"alias", regexp.MustCompile(`\balias\s+(?:-\S+\s+)*[^\s=]+=(?:\S*/)?gh\b`)},
	}
})

// ghPrefix is what may stand between the start of a simple command (the
// line's start or ;, &, |, (, ), {, }, a newline or a backquote) and a gh
// the shell runs: VAR=value assignments, wrappers such as env, xargs or
// bash -c, shell keywords, and gh's directory; or a command that find
// runs (-exec). Group 1 is the wrappers.
var ghPrefix = sync.OnceValue(func() *regexp.Regexp {
	wrapper := `(?:\w+=\S*|sudo|env|command|builtin|exec|eval|nohup|time|xargs|parallel|watch|nice|ionice|timeout|stdbuf|setsid|` +
		`if|then|else|elif|while|until|do|!|(?:ba|z|k|da)?sh|-\S+|\d\S*)`
	return regexp.MustCompile(`^\s*((?:` + wrapper + `\s+)*)(?:\S*/)?$|\s-(?:exec|execdir|ok|okdir)\s+(?:\S*/)?$`)
})

// ghArgs reads the command words of a gh invocation: group 1 is the first,
// group 2 the second (either empty when absent).
var ghArgs = sync.OnceValue(func() *regexp.Regexp {
	word := `(?:\s+([^-\s;&|()<>][^\s;&|)<>]*))?`
	return regexp.MustCompile(`^gh` + ghFlags + word + ghFlags + word)
})

// simpleCommandStart are the characters after which a new simple command
// starts.
const simpleCommandStart = ";&|(){}\n`"

// BoundaryCommand reports whether the shell command line performs a
// GitHub boundary action (see ghBoundary), and the text that matched
// ("gh issue close"). It looks at the whole line, so chaining ("true &&
// gh pr merge 1"), wrappers and paths ("/usr/bin/gh pr merge") do not
// hide one, and neither do the quotes and backslashes the shell removes
// before it runs a word ("'gh' pr 'merge'", "g\h pr merge"). Where the
// shell runs gh, it also refuses what cannot be checked: a first word that
// is not one of gh's own commands (an extension or an alias), a command
// word the shell computes ("gh $(echo pr) merge", "gh pr \"$x\"", a glob
// or brace), and gh run by xargs or parallel (which append words they
// read). Like any
// list of forbidden commands it can be evaded by a program that builds the
// command at run time (a script file, a renamed copy of gh); the sandbox's
// network isolation is the boundary that holds against that.
func BoundaryCommand(command string) (matched string, ok bool) {
	if m, ok := boundaryMatch(command); ok {
		return m, true
	}
	if strings.ContainsAny(command, `'"\`) {
		return boundaryMatch(shellUnquote.Replace(command))
	}
	return "", false
}

// shellUnquote removes the quote and escape characters the shell drops
// from a word, and joins lines continued with a backslash (the payload
// rules look for quotes, so the line is first matched as written).
var shellUnquote = strings.NewReplacer("\\\n", "", `'`, "", `"`, "", `\`, "")

// boundaryMatch matches command against the rules as written.
func boundaryMatch(command string) (string, bool) {
	for _, r := range lineRules() {
		if !strings.Contains(command, r.literal) {
			continue
		}
		if m := r.re.FindString(command); m != "" {
			return m, true
		}
	}
	if m, ok := ghRuleMatch(command); ok {
		return m, true
	}
	if strings.ContainsAny(command, "$`") {
		if m := computedGH().FindStringSubmatch(command); m != nil {
			return m[1], true
		}
	}
	return uncheckedGH(command)
}

// ghRuleMatch matches ghRule at every "gh" that starts a word.
func ghRuleMatch(command string) (string, bool) {
	for i := 0; ; {
		j := strings.Index(command[i:], "gh")
		if j < 0 {
			return "", false
		}
		at := i + j
		i = at + 2
		if at > 0 && isWordByte(command[at-1]) {
			continue
		}
		if m := ghRule().FindString(line(command[at:], "\n")); m != "" {
			return m, true
		}
	}
}

// isWordByte reports whether b is a word character of regexp's \b.
func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// uncheckedGH finds a gh invocation whose command cannot be checked: a
// first word that is not one of gh's commands, a computed command word,
// or gh run by xargs or parallel.
func uncheckedGH(command string) (string, bool) {
	start := 0 // where the simple command of the current gh starts
	for i := 0; ; {
		j := strings.Index(command[i:], "gh")
		if j < 0 {
			return "", false
		}
		at := i + j
		if k := strings.LastIndexAny(command[i:at], simpleCommandStart); k >= 0 {
			start = i + k + 1
		}
		i = at + 2
		if at > 0 && isWordByte(command[at-1]) || at+2 < len(command) && strings.IndexByte(nameChars, command[at+2]) >= 0 {
			continue // part of another word ("sigh", "ghc", "gh-x")
		}
		prefix := ghPrefix().FindStringSubmatch(command[start:at])
		if prefix == nil {
			continue // an argument of another command ("which gh")
		}
		args := line(command[at:], ";&|\n")
		if len(args) > 2 && strings.IndexByte(wordJoiners, args[2]) >= 0 {
			// gh's word goes on with an expansion or a brace
			// ("gh${IFS}pr${IFS}merge", "{gh,pr,merge}"): the shell
			// computes its words.
			return strings.TrimSpace(command[start : at+len(line(args, " \t"))]), true
		}
		m := ghArgs().FindStringSubmatchIndex(args)
		first, second := group(args, m, 1), group(args, m, 2)
		end := -1
		switch {
		case first != "" && !slices.Contains(ghCommands, first): // an extension, an alias or computed
			end = at + m[3]
		case computed(second):
			end = at + m[5]
		case slices.ContainsFunc(strings.Fields(prefix[1]), func(w string) bool { return w == "xargs" || w == "parallel" }):
			end = at + m[1]
		}
		if end >= 0 {
			return strings.TrimSpace(command[start:end]), true
		}
	}
}

// line returns s up to the first of the characters in ends: what a
// pattern that cannot cross them needs to see (the regexp package's cost
// grows with the text it is given).
func line(s, ends string) string {
	if i := strings.IndexAny(s, ends); i >= 0 {
		return s[:i]
	}
	return s
}

// wordJoiners are the characters that, right after a gh the shell runs,
// make its word one the shell computes: an expansion ($…, a backquote)
// or a brace expansion ({…}, a comma inside one).
const wordJoiners = "$`{,"

// nameChars are the characters that continue a program name.
const nameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

// group is submatch i of a FindStringSubmatchIndex match m of s ("" when
// it did not take part).
func group(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// computed reports whether a command word is computed by the shell when
// the command runs: expanded ($x, $(…), a backquote), or a glob or brace
// pattern that files the model creates could complete.
func computed(word string) bool {
	return strings.ContainsAny(word, "$`*?[{")
}

// mcpBoundaryTools are tools of GitHub MCP servers that perform a
// boundary action whatever their input: merging, and starting, re-running
// or cancelling workflows.
var mcpBoundaryTools = []string{
	"merge_pull_request", "run_workflow", "rerun_workflow_run", "rerun_failed_jobs", "cancel_workflow_run",
	"delete_workflow_run_logs",
}

// mcpReadTool matches the names of MCP tools that only read.
var mcpReadTool = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:list|get|search|read|view|download)_`)
})

// mcpApproval finds a pull request review that approves in an MCP tool's
// input.
var mcpApproval = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"event"\s*:\s*"APPROVE"`) })

// BoundaryToolCall reports whether a call of the MCP tool name (mcp__SERVER__TOOL)
// with the JSON input performs a GitHub boundary action: a tool of
// mcpBoundaryTools on any server, or a tool that does not only read (by
// its name: list_, get_, search_ …) with an input that approves a review,
// closes something ("state": "closed") or carries a refused command (a
// server that runs shell commands). Calls of other tools are not its
// concern (Bash is checked by BoundaryCommand).
func BoundaryToolCall(name string, input []byte) (matched string, ok bool) {
	server, tool, found := strings.Cut(strings.TrimPrefix(name, "mcp__"), "__")
	if !strings.HasPrefix(name, "mcp__") || !found {
		return "", false
	}
	if slices.Contains(mcpBoundaryTools, tool) {
		return tool + " (" + server + ")", true
	}
	if mcpReadTool().MatchString(tool) {
		return "", false // its input filters what it reads ("state": "closed")
	}
	if m, ok := boundaryInput(input); ok {
		return m, true
	}
	// The server decodes \uXXXX escapes ("clos\u0065d"), so the rules are
	// also matched against the input written without them.
	if bytes.Contains(input, []byte(`\u`)) {
		if plain, err := unescapedJSON(input); err == nil {
			return boundaryInput(plain)
		}
	}
	return "", false
}

// boundaryInput matches an MCP tool's JSON input against the approval
// rule and the command rules.
func boundaryInput(input []byte) (string, bool) {
	if m := mcpApproval().Find(input); m != nil {
		return string(m), true
	}
	return BoundaryCommand(string(input))
}

// unescapedJSON is the JSON text input re-encoded compactly, with no
// \uXXXX escapes but those JSON requires.
func unescapedJSON(input []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// BoundaryDenyPatterns are the boundary commands as Bash prefix patterns,
// for backends that enforce tool patterns themselves (the Claude Code
// CLI's --disallowedTools): every gh command of the list that is refused
// whatever follows, under each of its names, and the mcpBoundaryTools of
// each MCP server named. The rules on flags further on ("gh pr review …
// --approve"), on gh's own command list, on computed words and on MCP
// inputs, and the HTTP-client and payload rules, have no pattern form.
func BoundaryDenyPatterns(mcpServers ...string) []string {
	var out []string
	for _, r := range ghBoundary {
		if r.rest != "" {
			continue
		}
		prefixes := []string{"gh"}
		for _, w := range r.words {
			var next []string
			for _, p := range prefixes {
				for _, alt := range strings.Split(w, "|") {
					next = append(next, p+" "+alt)
				}
			}
			prefixes = next
		}
		for _, p := range prefixes {
			out = append(out, "Bash("+p+":*)")
		}
	}
	for _, server := range mcpServers {
		for _, t := range mcpBoundaryTools {
			out = append(out, "mcp__"+server+"__"+t)
		}
	}
	return out
}
