package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
)

// A key in the base URL (its user:password@ part or its query string)
// would be recorded in run.start, shown by `capstan show` and carried in
// a Temporal run's input: the run is refused before anything is recorded,
// wherever the URL comes from, and the error never quotes the key.
func TestBaseURLWithACredentialIsRefused(t *testing.T) {
	const secret = "sk-secret-0123456789"
	for _, tc := range []struct {
		name, baseURL, runnerURL, model, env string
		pointer                              string
	}{
		{name: "query of --base-url", baseURL: "https://gateway.example/v1?key=" + secret},
		{name: "password of --base-url", baseURL: "https://user:" + secret + "@gateway.example/v1"},
		{name: "token as user of --base-url", baseURL: "https://" + secret + "@gateway.example/v1"},
		{name: "key given as the URL", baseURL: secret},
		{name: "runner.baseUrl", runnerURL: "https://gateway.example/v1?api_key=" + secret, pointer: "/runner/baseUrl"},
		{name: "runner.baseUrl under a clean --base-url", baseURL: "https://gateway.example/v1", runnerURL: "https://u:" + secret + "@gateway.example/v1", pointer: "/runner/baseUrl"},
		{name: "provider's environment", model: "openai:gpt-test", env: "https://u:" + secret + "@gateway.example/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := basicAgent(t, twoIterationScript, "")
			if tc.runnerURL != "" {
				p := filepath.Join(dir, "agent.json")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				edited := strings.Replace(string(b), `"model": "script:script.yaml",`, `"model": "script:script.yaml", "baseUrl": "`+tc.runnerURL+`",`, 1)
				if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.runnerURL != "" {
				// validate (and so run) reports it, with the code of the
				// base URL's form.
				_, err := agentdir.LoadAndValidate(dir, ValidateOptions())
				if err == nil || !strings.Contains(err.Error(), "AC-BASE-URL") || !strings.Contains(err.Error(), "/runner/baseUrl") || strings.Contains(err.Error(), secret) {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			def := load(t, dir)
			wd, store := t.TempDir(), journal.Store{Dir: t.TempDir()}
			env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": tc.env}
			_, err := Build(context.Background(), def, BuildOptions{WorkDir: wd, Store: store, Model: tc.model, BaseURL: tc.baseURL,
				Getenv: func(k string) string { return env[k] }})
			e := agenterr.From(err)
			if e == nil || e.Code != agenterr.CodeConfigurationValidation || e.Pointer != tc.pointer {
				t.Fatalf("err = %v (%+v), want %s at %q", err, e, agenterr.CodeConfigurationValidation, tc.pointer)
			}
			if text := e.Error() + e.Hint; strings.Contains(text, secret) {
				t.Fatalf("the error quotes the key: %s", text)
			}
			if !strings.Contains(e.Hint, "OPENAI_API_KEY") {
				t.Errorf("hint %q does not say where the key goes", e.Hint)
			}
			if runs, err := store.List(wd); err != nil || len(runs) != 0 {
				t.Fatalf("a refused run was recorded: %+v %v", runs, err)
			}
		})
	}
}

// A base URL without a credential is recorded as given, with the endpoint.
func TestBaseURLIsRecorded(t *testing.T) {
	def := load(t, basicAgent(t, twoIterationScript, ""))
	wd, store := t.TempDir(), journal.Store{Dir: t.TempDir()}
	res := runToEnd(t, def, BuildOptions{WorkDir: wd, Store: store, BaseURL: "http://127.0.0.1:9/v1"})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
	runs, err := store.List(wd)
	if err != nil || len(runs) != 1 {
		t.Fatalf("%+v %v", runs, err)
	}
	b, err := os.ReadFile(runs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"baseUrl":"http://127.0.0.1:9/v1"`) || !strings.Contains(string(b), `"endpoint":"http://127.0.0.1:9/v1"`) {
		t.Fatalf("run.start lacks the base URL:\n%.2000s", b)
	}
}
