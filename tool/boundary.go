package tool

import (
	"regexp"
	"strings"
	"sync"
)

// boundaryCommands() are shell commands that change GitHub state in ways a
// run must leave to its end (closing, deleting, transferring or reopening
// issues; closing, merging or readying pull requests; creating or editing
// releases), any direct GitHub API call (which can do all of that), and
// HTTP clients or JSON payloads aimed at the API: the list climpt
// blocks, and defining gh aliases, which could give any of them a new
// name.
var boundaryCommands = sync.OnceValue(func() []*regexp.Regexp {
	// gh accepts flags (and their values) before and between its
	// command words ("gh -R o/r issue close 1", "gh issue -R o/r close 1").
	flags := `(?:\s+-\S+(?:\s+[^-\s]\S*)?)*`
	gh := func(words ...string) *regexp.Regexp {
		return regexp.MustCompile(`\bgh` + flags + `\s+` + strings.Join(words, flags+`\s+`) + `\b`)
	}
	return []*regexp.Regexp{
		gh("issue", "close"),
		gh("issue", "delete"),
		gh("issue", "transfer"),
		regexp.MustCompile(`\bgh` + flags + `\s+issue` + flags + `\s+edit\s+.*--state[\s=]+closed`),
		gh("issue", "reopen"),
		gh("pr", "close"),
		gh("pr", "merge"),
		gh("pr", "ready"),
		gh("release", "create"),
		gh("release", "edit"),
		gh("api"),
		// An alias ("gh alias set m 'pr merge'", then "gh m 1") would run
		// any of the above under a name the rules do not know.
		gh("alias", "set"),
		gh("alias", "import"),
		regexp.MustCompile(`\b(?:curl|wget|python[23]?|node|ruby|perl|deno)\b.*api\.github\.com`),
		regexp.MustCompile(`"state"\s*:\s*"closed"`),
		regexp.MustCompile(`'state'\s*:\s*'closed'`),
	}
})

// BoundaryCommand reports whether the shell command line performs a
// GitHub boundary action, and the text that matched ("gh issue close").
// It looks at the whole line, so chaining ("true && gh pr merge 1"),
// wrappers and paths ("/usr/bin/gh pr merge") do not hide one, and
// neither do the quotes and backslashes the shell removes before it runs
// a word ("'gh' pr 'merge'", "g\h pr merge"). Like any list of forbidden
// commands it can be evaded by a program that builds the command at run
// time; the sandbox's network isolation is the boundary that holds
// against that.
func BoundaryCommand(command string) (matched string, ok bool) {
	if m, ok := boundaryMatch(command); ok {
		return m, true
	}
	if plain := shellUnquote.Replace(command); plain != command {
		return boundaryMatch(plain)
	}
	return "", false
}

// shellUnquote removes the quote and escape characters the shell drops
// from a word (the payload rules look for quotes, so the line is first
// matched as written).
var shellUnquote = strings.NewReplacer(`'`, "", `"`, "", `\`, "")

// boundaryMatch matches command against the rules as written.
func boundaryMatch(command string) (string, bool) {
	// Every rule needs one of these words; most commands have none.
	if !strings.Contains(command, "gh") && !strings.Contains(command, "api.github.com") && !strings.Contains(command, "closed") {
		return "", false
	}
	for _, re := range boundaryCommands() {
		if m := re.FindString(command); m != "" {
			return m, true
		}
	}
	return "", false
}

// BoundaryDenyPatterns are the boundary commands as Bash prefix patterns,
// for backends that enforce tool patterns themselves (the Claude Code
// CLI's --disallowedTools). They cover the gh subcommands; the HTTP-client
// and payload rules have no pattern form.
func BoundaryDenyPatterns() []string {
	return []string{
		"Bash(gh issue close:*)", "Bash(gh issue delete:*)", "Bash(gh issue transfer:*)", "Bash(gh issue reopen:*)",
		"Bash(gh pr close:*)", "Bash(gh pr merge:*)", "Bash(gh pr ready:*)",
		"Bash(gh release create:*)", "Bash(gh release edit:*)", "Bash(gh api:*)",
		"Bash(gh alias set:*)", "Bash(gh alias import:*)",
	}
}
