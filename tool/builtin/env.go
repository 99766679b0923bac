package builtin

import (
	"os"
	"regexp"
	"sort"
	"strings"
)

// secretSuffixes mark environment variables that hold credentials.
var secretSuffixes = []string{"_API_KEY", "_APIKEY", "_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASSWD", "_CREDENTIALS", "_AUTH", "_HEADERS"}

// secretNames are credential variables without a telling suffix.
var secretNames = map[string]bool{
	"API_KEY": true, "TOKEN": true, "SECRET": true, "PASSWORD": true,
	"AWS_SECRET_ACCESS_KEY": true, "GOOGLE_APPLICATION_CREDENTIALS": true,
}

// IsSecretName reports whether an environment variable name looks like a
// credential: it ends in _API_KEY, _APIKEY, _KEY, _TOKEN, _SECRET,
// _PASSWORD, _PASSWD, _CREDENTIALS, _AUTH or _HEADERS (request headers such
// as OTEL_EXPORTER_OTLP_HEADERS carry API keys), or is one of API_KEY, TOKEN,
// SECRET, PASSWORD, AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS
// (case-insensitive).
func IsSecretName(name string) bool {
	n := strings.ToUpper(name)
	if secretNames[n] {
		return true
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// IsSecretValue reports whether a variable's value embeds a password in a
// URL ("postgres://user:password@host/db").
func IsSecretValue(v string) bool {
	return urlPassword.MatchString(v)
}

var urlPassword = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s:]*:([^/@\s]+)@`)

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
		for _, m := range urlPassword.FindAllStringSubmatch(v, -1) {
			add(m[1])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// BuildEnv returns the environment for commands: environ without secrets
// (IsSecretName, IsSecretValue), then the explicit entries of extra applied
// on top.
// "KEY=value" sets a variable; a bare "KEY" copies KEY from environ (so a
// secret can be passed on purpose). The result is sorted by name.
func BuildEnv(environ, extra []string) []string {
	vars := map[string]string{}
	host := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		host[k] = v
		if !IsSecretName(k) && !IsSecretValue(v) {
			vars[k] = v
		}
	}
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			continue
		}
		if !ok {
			hv, present := host[k]
			if !present {
				hv, present = os.LookupEnv(k)
			}
			if !present {
				continue
			}
			v = hv
		}
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
