package proc

import (
	"os"
	"slices"
	"strings"
	"sync"
)

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
