package proc

import (
	"os"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/internal/lazyre"
)

// secretWords mark environment variables that hold credentials when they
// appear as a whole "_"-separated word of the name: OPENAI_API_KEY_2,
// SECRET_KEY_BASE, GH_PAT, SSH_AUTH_SOCK, OTEL_EXPORTER_OTLP_HEADERS.
var secretWords = map[string]bool{
	"KEY": true, "APIKEY": true, "TOKEN": true, "SECRET": true, "PASSWORD": true, "PASSWD": true,
	"PASS": true, "PAT": true, "CREDENTIAL": true, "CREDENTIALS": true, "AUTH": true, "HEADERS": true,
	"PRIVATE": true, "COOKIE": true, "SIGNATURE": true, "DSN": true, "WEBHOOK": true,
}

// secretSuffixes mark names that end in a credential word without a "_"
// before it: PGPASSWORD, SSHPASS, MYSQL_PWD, GHTOKEN.
var secretSuffixes = []string{"PASSWORD", "PASSWD", "PASS", "PWD", "TOKEN", "SECRET", "APIKEY", "API_KEY"}

// secretPrefixes mark the session variables of password managers, which
// unlock a whole vault: OP_SESSION_<account> (1Password), BW_SESSION
// (Bitwarden).
var secretPrefixes = []string{"OP_SESSION_", "BW_SESSION"}

// SecretVarsEnv names the variable in which a user lists further secret
// variables, comma-separated ("CAPSTAN_SECRET_VARS=DATABASE_URL,SENTRY_DSN").
const SecretVarsEnv = "CAPSTAN_SECRET_VARS"

// IsSecretName reports whether an environment variable name looks like a
// credential: one of its "_"-separated words (case-insensitive) is KEY,
// APIKEY, TOKEN, SECRET, PASSWORD, PASSWD, PASS, PAT, CREDENTIAL(S), AUTH,
// HEADERS (request headers such as OTEL_EXPORTER_OTLP_HEADERS carry API
// keys), PRIVATE, COOKIE, SIGNATURE, DSN or WEBHOOK, the name ends in
// PASSWORD, PASSWD, PASS, PWD, TOKEN, SECRET or APIKEY (PGPASSWORD,
// SSHPASS, MYSQL_PWD; not PWD and OLDPWD, the shell's directories), it is
// a password manager's session (OP_SESSION_*, BW_SESSION), or the user
// listed it in CAPSTAN_SECRET_VARS. Names are a second line of defence:
// the processes capstan starts get only the variables they are allowed
// (see ForCommands), so a secret no rule names is not passed either.
func IsSecretName(name string) bool {
	n := strings.ToUpper(name)
	for w := range strings.SplitSeq(n, "_") {
		if secretWords[w] {
			return true
		}
	}
	if n != "PWD" && n != "OLDPWD" {
		for _, suf := range secretSuffixes {
			if strings.HasSuffix(n, suf) {
				return true
			}
		}
	}
	for _, pre := range secretPrefixes {
		if strings.HasPrefix(n, pre) {
			return true
		}
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
