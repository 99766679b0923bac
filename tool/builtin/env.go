package builtin

import (
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/tool"
)

// secretWords mark environment variables that hold credentials when they
// appear as a whole "_"-separated word of the name: OPENAI_API_KEY_2,
// SECRET_KEY_BASE, GH_PAT, SSH_AUTH_SOCK, OTEL_EXPORTER_OTLP_HEADERS.
var secretWords = map[string]bool{
	"KEY": true, "APIKEY": true, "TOKEN": true, "SECRET": true, "PASSWORD": true, "PASSWD": true,
	"PASS": true, "PAT": true, "CREDENTIAL": true, "CREDENTIALS": true, "AUTH": true, "HEADERS": true,
	"PRIVATE": true, "COOKIE": true, "SIGNATURE": true,
}

// SecretVarsEnv names the variable in which a user lists further secret
// variables, comma-separated ("CAPSTAN_SECRET_VARS=DATABASE_URL,SENTRY_DSN").
const SecretVarsEnv = "CAPSTAN_SECRET_VARS"

// IsSecretName reports whether an environment variable name looks like a
// credential: one of its "_"-separated words (case-insensitive) is KEY,
// APIKEY, TOKEN, SECRET, PASSWORD, PASSWD, PASS, PAT, CREDENTIAL(S), AUTH,
// HEADERS (request headers such as OTEL_EXPORTER_OTLP_HEADERS carry API
// keys), PRIVATE, COOKIE or SIGNATURE, it ends in _APIKEY, or the user
// listed it in CAPSTAN_SECRET_VARS.
func IsSecretName(name string) bool {
	n := strings.ToUpper(name)
	for w := range strings.SplitSeq(n, "_") {
		if secretWords[w] {
			return true
		}
	}
	if strings.HasSuffix(n, "APIKEY") || strings.HasSuffix(n, "API_KEY") {
		return true
	}
	for listed := range strings.SplitSeq(os.Getenv(SecretVarsEnv), ",") {
		if l := strings.TrimSpace(listed); l != "" && strings.EqualFold(l, name) {
			return true
		}
	}
	return false
}

// IsSecret reports whether the variable name=value holds a secret, by its
// name (IsSecretName) or its value (IsSecretValue).
func IsSecret(name, value string) bool {
	return IsSecretName(name) || IsSecretValue(value)
}

// IsSecretValue reports whether a variable's value embeds a password in a
// URL ("postgres://user:password@host/db").
func IsSecretValue(v string) bool {
	return urlPassword().MatchString(v)
}

var urlPassword = lazyre.New(`[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s:]*:([^/@\s]+)@`)

// MinSecretLen is the shortest value SecretValues returns: shorter values
// ("1", "true") would redact ordinary words.
const MinSecretLen = 8

// SecretValues returns the secret values of environ ("NAME=value" entries,
// as from os.Environ) that must never be shown: the value of every
// variable IsSecretName or IsSecretValue flags, plus its parts that are
// secrets on their own — each header value of a "k1=v1,k2=v2" headers
// variable and the password of a URL — so a part quoted without the rest
// is caught too. Values shorter than MinSecretLen are left out; the result
// has no duplicates and is sorted longest first, so a redactor that
// replaces in order replaces a secret containing another one whole.
func SecretValues(environ []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		named := IsSecretName(k)
		if !named && !IsSecretValue(v) {
			continue
		}
		add(v)
		if named && strings.HasSuffix(strings.ToUpper(k), "_HEADERS") {
			for _, h := range strings.Split(v, ",") {
				if _, hv, ok := strings.Cut(h, "="); ok {
					add(strings.TrimSpace(hv))
				}
			}
		}
		for _, m := range urlPassword().FindAllStringSubmatch(v, -1) {
			add(m[1])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// BaseEnv lists the variables every command gets from capstan's own
// environment (besides LC_* locale variables): what shells, compilers and
// test runners need to work, and nothing that identifies a service or an
// account. Everything else reaches a command only through an allow-list
// (runner.boundaries.env).
var BaseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"}

// BuildEnv returns the environment for commands the model runs (Bash,
// validators, MCP servers): the BaseEnv variables and LC_* of environ that
// are not secrets, plus the entries of allow:
//
//   - "NAME" copies NAME from environ, secret or not (the way to hand a
//     command GH_TOKEN on purpose);
//   - "PREFIX*" copies every variable whose name starts with PREFIX,
//     except secrets (list those by name);
//   - "NAME=value" sets NAME.
//
// The result is sorted by name.
func BuildEnv(environ, allow []string) []string {
	vars := map[string]string{}
	host := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		host[k] = v
		if (slices.Contains(BaseEnv, k) || strings.HasPrefix(k, "LC_")) && !IsSecret(k, v) {
			vars[k] = v
		}
	}
	for _, kv := range allow {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case k == "":
		case ok:
			vars[k] = v
		case strings.HasSuffix(k, "*"):
			prefix := strings.TrimSuffix(k, "*")
			for hk, hv := range host {
				if strings.HasPrefix(hk, prefix) && !IsSecret(hk, hv) {
					vars[hk] = hv
				}
			}
		default:
			if hv, present := host[k]; present {
				vars[k] = hv
			}
		}
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// lastEnv is the environment commandEnv made last, with its inputs.
var lastEnv struct {
	mu                  sync.Mutex
	environ, allow, env []string
}

// commandEnv is BuildEnv for the Bash tool of a new tool set: when the
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
	env := slices.Clip(BuildEnv(environ, allow))
	lastEnv.environ, lastEnv.allow, lastEnv.env = environ, slices.Clone(allow), env
	return env
}

// Redacted is what RedactSecrets puts in place of a secret value.
const Redacted = "[REDACTED]"

// RedactSecrets replaces every secret value of capstan's environment
// (SecretValues of os.Environ, so the name patterns, URL passwords and
// CAPSTAN_SECRET_VARS) in s with [REDACTED]. Tool results, MCP results and
// validator output pass through it before the model, the journal or a
// transcript sees them.
func RedactSecrets(s string) string {
	if s == "" {
		return s
	}
	return replaceSecrets(s, sharedSecretValues(os.Environ()))
}

// lastSecrets is the list sharedSecretValues worked out last, with its
// inputs.
var lastSecrets struct {
	mu      sync.Mutex
	environ []string
	listed  string // CAPSTAN_SECRET_VARS when it was worked out
	secrets []string
}

// sharedSecretValues is SecretValues for the redactors: when environ and
// CAPSTAN_SECRET_VARS are those of the previous call (every agent of a
// process, every tool result of a run), it returns the same list instead
// of working it out again. The list is shared and read-only; its capacity
// is its length, so an append copies it.
func sharedSecretValues(environ []string) []string {
	listed := os.Getenv(SecretVarsEnv)
	lastSecrets.mu.Lock()
	defer lastSecrets.mu.Unlock()
	if lastSecrets.environ != nil && listed == lastSecrets.listed && slices.Equal(environ, lastSecrets.environ) {
		return lastSecrets.secrets
	}
	secrets := slices.Clip(SecretValues(environ))
	lastSecrets.environ, lastSecrets.listed, lastSecrets.secrets = slices.Clone(environ), listed, secrets
	return secrets
}

// SecretRedactor returns a function that replaces each of
// SecretValues(environ) with [REDACTED], the list worked out once; nil
// when environ holds no secret values, so a caller can skip redaction
// altogether. Model replies pass through it (llm.Config.Redact).
func SecretRedactor(environ []string) func(string) string {
	secrets := sharedSecretValues(environ)
	if len(secrets) == 0 {
		return nil
	}
	return func(s string) string { return replaceSecrets(s, secrets) }
}

// replaceSecrets replaces each of secrets (longest first) in s with
// Redacted; s is returned as it is when it holds none.
func replaceSecrets(s string, secrets []string) string {
	for _, v := range secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return s
}

// RedactTools wraps each tool so that its results pass through
// RedactSecrets.
func RedactTools(tools []tool.Tool) []tool.Tool {
	out := make([]tool.Tool, len(tools))
	for i, t := range tools {
		out[i] = tool.Redacting(t, RedactSecrets)
	}
	return out
}
