// Package tooldecl is how an agent declares its tools: the MCP servers
// whose tools it may call (MCPServer, runner.mcpServers) and the grammar of
// the tool patterns of allowedTools and disallowedTools ("Read",
// "mcp__github__*", "Bash(git log:*)"). It imports nothing of capstan, so
// the agent folder's loader (agentdir) reads and checks these values
// without depending on the tool runtime (tool, tool/mcp) that acts on them.
package tooldecl

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ValidatePattern reports whether p is a well-formed tool pattern.
func ValidatePattern(p string) error {
	name, rule, hasRule, err := SplitPattern(p)
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
	if hasRule && name != "Bash" && rule != "*" && !doublestar.ValidatePattern(strings.TrimPrefix(rule, "./")) {
		return fmt.Errorf("tool pattern %q: bad path glob %q", p, rule)
	}
	return nil
}

// SplitPattern splits a tool pattern into its tool name (or glob) and
// its argument rule: "Bash(git log:*)" is Bash and "git log:*", "Read" is
// Read with no rule. A pattern with unbalanced parentheses is an error.
func SplitPattern(p string) (name, rule string, hasRule bool, err error) {
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
