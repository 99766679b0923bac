package proc

import (
	"strings"
	"testing"
)

func TestIsSecretNameAndForCommands(t *testing.T) {
	for name, want := range map[string]bool{
		"ANTHROPIC_API_KEY": true, "OPENAI_API_KEY": true, "GITHUB_TOKEN": true, "GH_TOKEN": true,
		"AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true, "CLIENT_SECRET": true, "db_password": true,
		"api_key": true, "TOKEN": true, "SLACK_APIKEY": true, "GOOGLE_APPLICATION_CREDENTIALS": true,
		"STRIPE_KEY": true, "NPM_CONFIG__AUTH": true, "GH_PAT": true, "SECRET_KEY_BASE": true, "OPENAI_API_KEY_2": true, "SSH_AUTH_SOCK": true, "OTEL_EXPORTER_OTLP_HEADERS": true, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": true,
		"PATH": false, "HOME": false, "TOKENIZERS_PARALLELISM": false, "GOFLAGS": false, "SECRETARY": false, "KEYBOARD": false, "KEYS_DIR": false,
	} {
		if got := IsSecretName(name); got != want {
			t.Errorf("IsSecretName(%s) = %v", name, got)
		}
	}
	for v, want := range map[string]bool{
		"postgres://app:hunter2@db:5432/x": true, "https://user:tok@github.com/o/r.git": true,
		"https://github.com/o/r": false, "http://localhost:8080": false, "a:b@c": false, "mailto:x@y": false,
	} {
		if IsSecretValue(v) != want {
			t.Errorf("IsSecretValue(%q) = %v", v, !want)
		}
	}
	env := ForCommands([]string{"DATABASE_URL=postgres://u:pw@h/db", "A=1", "X_TOKEN=t", "B=2=3", "malformed", "=x", "K_API_KEY=k", "PATH=/bin", "LC_ALL=C", "HOME=postgres://u:pw@h/x"}, []string{"X_TOKEN", "A=override", "C=new", "ABSENT"})
	if got := strings.Join(env, " "); got != "A=override C=new LC_ALL=C PATH=/bin X_TOKEN=t" {
		t.Errorf("BuildEnv = %s", got)
	}
}

// TestSecretValues: whole values and the parts that are secrets on their
// own (a header value, a URL's password), long enough, once, longest first.
func TestSecretValues(t *testing.T) {
	got := SecretValues([]string{
		"ANTHROPIC_API_KEY=sk-ant-0123456789",
		"GITHUB_TOKEN=ghp_abcdefgh",
		"HOME=/home/someone-long",
		"SHORT_TOKEN=abc",
		"OTEL_EXPORTER_OTLP_HEADERS=x-honeycomb-team=abcdef123, x-other=short,authorization=Bearer tok-0123456789",
		"DATABASE_URL=postgres://app:hunter2hunter2@db:5432/x",
		"COPY_OF_KEY=sk-ant-0123456789",
		"broken",
	})
	want := []string{
		"x-honeycomb-team=abcdef123, x-other=short,authorization=Bearer tok-0123456789",
		"postgres://app:hunter2hunter2@db:5432/x",
		"Bearer tok-0123456789",
		"sk-ant-0123456789",
		"hunter2hunter2",
		"ghp_abcdefgh",
		"abcdef123",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	env := ForCommands([]string{"OTEL_EXPORTER_OTLP_HEADERS=x-honeycomb-team=abcdef123", "PATH=/bin"}, nil)
	if strings.Join(env, " ") != "PATH=/bin" {
		t.Errorf("BuildEnv kept the OTLP headers: %v", env)
	}
}
