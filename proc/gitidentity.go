package proc

import (
	"context"
	"os/exec"
	"slices"
	"strings"
)

// gitIdentityVars are the variables that say who a commit is made by, in
// the order UserIdentity returns them, with the configuration key each
// falls back to.
var gitIdentityVars = [][2]string{
	{"GIT_AUTHOR_NAME", "user.name"}, {"GIT_AUTHOR_EMAIL", "user.email"},
	{"GIT_COMMITTER_NAME", "user.name"}, {"GIT_COMMITTER_EMAIL", "user.email"},
}

// IsGitIdentityVar reports whether name is one of the variables that
// say who a commit is made by (GIT_AUTHOR_NAME, …).
func IsGitIdentityVar(name string) bool {
	return slices.ContainsFunc(gitIdentityVars, func(v [2]string) bool { return v[0] == name })
}

// CommitIdentity says who git commits in dir are made by, for the
// model's commands there. local is true when dir's repository sets
// user.name and user.email itself: git reads them there, sandboxed or
// not. Otherwise env is the user's identity (UserIdentity of environ),
// nil when it is unknown.
func (g *Git) CommitIdentity(ctx context.Context, dir string, environ []string) (env []string, local bool) {
	name, _ := g.Output(ctx, dir, "config", "--local", "--get", "user.name")
	email, _ := g.Output(ctx, dir, "config", "--local", "--get", "user.email")
	if strings.TrimSpace(string(name)) != "" && strings.TrimSpace(string(email)) != "" {
		return nil, true
	}
	return g.UserIdentity(ctx, environ), false
}

// UserIdentity is the git identity the user commits as, for the model's
// commands in a sandbox, whose HOME is private (git there reads no
// ~/.gitconfig): GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME and
// GIT_COMMITTER_EMAIL as "NAME=value" entries. Each is environ's value
// when set there, else user.name or user.email of the user's global and
// system configuration — never of a repository. nil when a name or an
// email is unknown.
func (g *Git) UserIdentity(ctx context.Context, environ []string) []string {
	env := slices.DeleteFunc(slices.Clone(g.env), func(kv string) bool {
		return kv == "GIT_CONFIG_GLOBAL=/dev/null" || kv == "GIT_CONFIG_NOSYSTEM=1"
	})
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k == "GIT_CONFIG_GLOBAL" || k == "XDG_CONFIG_HOME" {
			env = append(env, kv)
		}
	}
	fromConfig := map[string]string{}
	lookup := func(key string) string {
		if v, ok := fromConfig[key]; ok {
			return v
		}
		var v string
		for _, scope := range []string{"--global", "--system"} {
			cmd := exec.CommandContext(ctx, g.path, "config", scope, "--get", key)
			cmd.Env, cmd.Dir = env, "/"
			if out, err := cmd.Output(); err == nil && strings.TrimSpace(string(out)) != "" {
				v = strings.TrimSpace(string(out))
				break
			}
		}
		fromConfig[key] = v
		return v
	}
	out := make([]string, 0, len(gitIdentityVars))
	for _, v := range gitIdentityVars {
		val := strings.TrimSpace(valueOf(environ, v[0]))
		if val == "" {
			val = lookup(v[1])
		}
		if val == "" || strings.ContainsAny(val, "\n\x00") {
			return nil
		}
		out = append(out, v[0]+"="+val)
	}
	return out
}

// valueOf is the value of name in environ ("" when unset).
func valueOf(environ []string, name string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}
