package llm

import (
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

func TestCheckBaseURL(t *testing.T) {
	const secret = "sk-secret-0123456789"
	for _, u := range []string{
		"https://api.openai.com/v1",
		"http://localhost:11434/v1/",
		"http://127.0.0.1:8080",
		"https://gateway.example/anthropic/",
	} {
		if err := CheckBaseURL("--base-url", u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
	for _, tc := range []struct{ u, part string }{
		{"https://gateway.example/v1?key=" + secret, "query string"},
		{"https://gateway.example/v1?" + secret, "query string"},
		{"https://gateway.example/v1?", "query string"},
		{"https://gateway.example/v1#" + secret, "fragment"},
		{"https://gateway.example/v1#", "fragment"},
		{"https://user:" + secret + "@gateway.example/v1", "user or password"},
		{"https://" + secret + "@gateway.example/v1", "user or password"},
		{secret, "not an absolute http(s) URL"},
		{"ftp://gateway.example/" + secret, "not an absolute http(s) URL"},
		{"https://gateway.example/%zz" + secret, "not an absolute http(s) URL"},
	} {
		err := CheckBaseURL("--base-url", tc.u)
		e := agenterr.From(err)
		if e == nil || e.Code != agenterr.CodeConfigurationValidation {
			t.Errorf("%s: err = %v", tc.u, err)
			continue
		}
		if !strings.Contains(e.Message, tc.part) || !strings.HasPrefix(e.Message, "--base-url ") {
			t.Errorf("%s: message %q does not name %q", tc.u, e.Message, tc.part)
		}
		if strings.Contains(e.Error()+e.Hint, secret) {
			t.Errorf("%s: the error quotes the key: %s %s", tc.u, e.Error(), e.Hint)
		}
		if !strings.Contains(e.Hint, "OPENAI_API_KEY") || !strings.Contains(e.Hint, "ANTHROPIC_API_KEY") {
			t.Errorf("%s: hint %q does not say where keys go", tc.u, e.Hint)
		}
	}
}

// CheckBaseURLKey looks only for a key: the URL's form is its caller's.
func TestCheckBaseURLKey(t *testing.T) {
	for _, u := range []string{"localhost:11434", "https://gw.example/%zz", "http://localhost:11434/v1"} {
		if err := CheckBaseURLKey("x", u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	if err := CheckBaseURLKey("x", "https://gw.example/v1?key=k"); err == nil {
		t.Error("a query string passed")
	}
}

func TestRedactedBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://gateway.example/v1":                   "https://gateway.example/v1",
		"https://u:sk-secret@gateway.example/v1":       "https://REDACTED@gateway.example/v1",
		"https://sk-secret@gateway.example/v1":         "https://REDACTED@gateway.example/v1",
		"https://gateway.example/v1?key=sk-secret&v=2": "https://gateway.example/v1?REDACTED",
		"https://gateway.example/v1?sk-secret":         "https://gateway.example/v1?REDACTED",
		"https://gateway.example/v1#sk-secret":         "https://gateway.example/v1#REDACTED",
		"https://gateway.example/%zz?key=sk-secret":    "(a URL that does not parse)",
	} {
		if got := RedactedBaseURL(in); got != want {
			t.Errorf("RedactedBaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}
