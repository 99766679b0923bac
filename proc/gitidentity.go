package proc

import (
	"context"
	"maps"
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

// identityKeys matches the configuration keys of a commit's identity,
// for git config --get-regexp.
const identityKeys = `^user\.(name|email)$`

// CommitIdentity says who git commits in dir are made by, for the
// model's commands there. local is true when dir's repository sets
// user.name and user.email itself: git reads them there, sandboxed or
// not. Otherwise env is the user's identity (UserIdentity of environ),
// nil when it is unknown.
func (g *Git) CommitIdentity(ctx context.Context, dir string, environ []string) (env []string, local bool) {
	out, _ := g.Output(ctx, dir, "config", "--local", "-z", "--get-regexp", identityKeys)
	if own := parseIdentity(out); own["user.name"] != "" && own["user.email"] != "" {
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
	var fromConfig map[string]string // read once, when environ lacks a value
	lookup := func(key string) string {
		if fromConfig == nil {
			fromConfig = map[string]string{}
			// The global scope wins over the system one, as in git.
			for _, scope := range []string{"--system", "--global"} {
				cmd := exec.CommandContext(ctx, g.path, "config", scope, "-z", "--get-regexp", identityKeys)
				cmd.Env, cmd.Dir = env, "/"
				out, _ := cmd.Output()
				maps.Copy(fromConfig, parseIdentity(out))
			}
		}
		return fromConfig[key]
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

// parseIdentity reads the output of git config -z --get-regexp (entries
// "key\nvalue" ended by NUL): the last non-empty value of each key, as git
// config --get returns it, trimmed. A value that spans lines is kept as
// it is, for UserIdentity to refuse.
func parseIdentity(out []byte) map[string]string {
	vals := map[string]string{}
	for _, entry := range strings.Split(string(out), "\x00") {
		key, val, _ := strings.Cut(entry, "\n")
		if val = strings.TrimSpace(val); key != "" && val != "" {
			vals[strings.ToLower(key)] = val
		}
	}
	return vals
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
