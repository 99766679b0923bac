package builtin

import (
	"slices"
	"sync"

	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/tool"
)

// lastEnv is the environment commandEnv made last, with its inputs.
var lastEnv struct {
	mu                  sync.Mutex
	environ, allow, env []string
}

// commandEnv is proc.ForCommands for the Bash tool of a new tool set: when the
// process environment and the allow list are those of the previous call
// (every agent a process builds from one definition), it returns the same
// list instead of a new copy. The list is shared and read-only; its
// capacity is its length, so an append copies it.
func commandEnv(environ, allow []string) []string {
	lastEnv.mu.Lock()
	defer lastEnv.mu.Unlock()
	if lastEnv.env != nil && slices.Equal(environ, lastEnv.environ) && slices.Equal(allow, lastEnv.allow) {
		return lastEnv.env
	}
	env := slices.Clip(proc.ForCommands(environ, allow))
	lastEnv.environ, lastEnv.allow, lastEnv.env = environ, slices.Clone(allow), env
	return env
}

// RedactTools wraps each tool so that its results pass through
// proc.RedactSecrets.
func RedactTools(tools []tool.Tool) []tool.Tool {
	out := make([]tool.Tool, len(tools))
	for i, t := range tools {
		out[i] = tool.Redacting(t, proc.RedactSecrets)
	}
	return out
}
