package llm

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
)

// CheckBaseURL refuses a base URL that carries a credential: a user or
// password before the host ("https://user:token@host", "https://token@host")
// or a query string ("https://host/v1?key=sk-…"). capstan records the base
// URL a run talks to in its journal, `capstan show` prints it and a run on
// Temporal carries it in workflow history, so a key in it would be kept
// and shown; the model clients never send a base URL's query string
// anyway. source names where u came from ("--base-url", "runner.baseUrl",
// "OPENAI_BASE_URL"); the error names the part to remove, never its value.
// A fragment (#…), which is never sent either, is refused the same way.
// What is not an absolute http(s) URL is refused too, without being
// quoted: it may be a key given in the wrong place.
func CheckBaseURL(source, u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"%s is not an absolute http(s) URL", source)
		e.Hint = "give the API's address, such as https://gateway.example/v1 or http://localhost:11434/v1, and the key by environment: " + keyVariables
		return e
	}
	return CheckBaseURLKey(source, u)
}

// CheckBaseURLKey is the part of CheckBaseURL that refuses a credential
// (user, password, query string, fragment) in u, for a caller that checks
// the rest of the URL's form itself. A URL that does not parse is left to
// that caller.
func CheckBaseURLKey(source, u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return nil
	}
	var part string
	switch {
	case p.User != nil:
		part = "a user or password before the host (user:token@)"
	case p.RawQuery != "" || p.ForceQuery:
		part = "a query string (?…)"
	case p.Fragment != "" || strings.Contains(u, "#"):
		part = "a fragment (#…)"
	default:
		return nil
	}
	e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
		"%s carries %s; capstan records the base URL in the run's journal (and a run on Temporal in workflow history), so it must not hold a key", source, part)
	e.Hint = fmt.Sprintf("remove it from %s and give the key by environment: %s", source, keyVariables)
	return e
}

// keyVariables names the environment variables that carry the providers'
// keys.
const keyVariables = "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN (anthropic, claude-code), OPENAI_API_KEY (openai)"

// RedactedBaseURL is u for messages: the user and password before the
// host, the query string and the fragment each replaced with "REDACTED".
// A URL that does not parse is shown as "(a URL that does not parse)".
func RedactedBaseURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if p.User != nil {
		p.User = url.User("REDACTED")
	}
	if p.RawQuery != "" || p.ForceQuery {
		p.RawQuery, p.ForceQuery = "REDACTED", false
	}
	if p.Fragment != "" || p.RawFragment != "" {
		p.Fragment, p.RawFragment = "REDACTED", ""
	}
	return p.String()
}
