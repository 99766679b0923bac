package tracing

import "strings"

// secretNameParts mark an environment variable whose value is a secret.
var secretNameParts = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "HEADERS"}

// minSecret is the shortest value treated as a secret (shorter values, such
// as "1" or "true", would redact ordinary words).
const minSecret = 8

// SecretValues returns the values of the environment entries ("NAME=value",
// as from os.Environ) whose names look like they hold a secret — API keys,
// tokens, passwords, OTLP headers — for Config.Secrets.
func SecretValues(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(value) < minSecret {
			continue
		}
		upper := strings.ToUpper(name)
		for _, p := range secretNameParts {
			if strings.Contains(upper, p) {
				out = append(out, value)
				break
			}
		}
	}
	return out
}
