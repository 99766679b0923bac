package main

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/internal/yamlsafe"
	"github.com/capstan-dev/capstan/sandbox"
)

func fakeDoctorEnv(vars map[string]string, missing ...string) doctorEnv {
	return doctorEnv{
		getenv: func(k string) string { return vars[k] },
		lookPath: func(name string) (string, error) {
			for _, m := range missing {
				if m == name {
					return "", errors.New("not found")
				}
			}
			return exec.LookPath(name)
		},
		probe: func(context.Context) sandbox.Capabilities {
			return sandbox.Capabilities{Reason: "user namespaces are disabled", Hint: "sysctl kernel.unprivileged_userns_clone=1"}
		},
	}
}

func findCheck(t *testing.T, checks []doctorCheck, name string) doctorCheck {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return doctorCheck{}
}

func TestDoctorNeverPrintsKeysAndFailsOnWhatIsRequired(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	const secret = "sk-ant-doctor-SECRET-0123456789"
	checks := runDoctor(context.Background(), fakeDoctorEnv(map[string]string{
		"ANTHROPIC_API_KEY": secret, "OPENAI_BASE_URL": "https://user:pa55word@llm.example.com/v1", "CAPSTAN_MODEL": "openai:gpt-5",
	}, "git", "claude"))
	var all strings.Builder
	printDoctor(&all, checks)
	if strings.Contains(all.String(), secret) || strings.Contains(all.String(), "pa55word") {
		t.Fatalf("a secret was printed:\n%s", all.String())
	}
	if c := findCheck(t, checks, "anthropic key"); c.Status != checkOK || c.Detail != "ANTHROPIC_API_KEY is set" {
		t.Fatalf("anthropic: %+v", c)
	}
	// The openai base URL carries a password: printed redacted, and a
	// failed check, since runs refuse it.
	if c := findCheck(t, checks, "openai key"); !strings.Contains(c.Detail, "OPENAI_BASE_URL=https://REDACTED@llm.example.com/v1") || !strings.Contains(c.Detail, "carries a user or password") || !strings.Contains(c.Hint, "OPENAI_API_KEY") {
		t.Fatalf("openai base URL: %+v", c)
	}
	// The default model is openai's, so its key is required.
	if c := findCheck(t, checks, "openai key"); c.Status != checkFail || !strings.Contains(c.Detail, "your default model openai:gpt-5 needs it") {
		t.Fatalf("openai: %+v", c)
	}
	if c := findCheck(t, checks, "git"); c.Status != checkFail || !strings.Contains(c.Hint, "apt-get install git") {
		t.Fatalf("git: %+v", c)
	}
	if c := findCheck(t, checks, "claude CLI"); c.Status != checkWarn {
		t.Fatalf("claude is optional unless the default model uses it: %+v", c)
	}
	if c := findCheck(t, checks, "sandbox namespaces"); c.Status != checkWarn || c.Hint != "sysctl kernel.unprivileged_userns_clone=1" {
		t.Fatalf("sandbox: %+v", c)
	}
}

// A key in a base URL's query string is not printed either, and fails
// the provider's check: a run would refuse it.
func TestDoctorRedactsAQueryKeyInTheBaseURL(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	const secret = "sk-ant-query-SECRET-0123456789"
	checks := runDoctor(context.Background(), fakeDoctorEnv(map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-key", "ANTHROPIC_BASE_URL": "https://gw.example/v1?key=" + secret,
	}, "git", "claude"))
	var all strings.Builder
	printDoctor(&all, checks)
	if strings.Contains(all.String(), secret) {
		t.Fatalf("a key was printed:\n%s", all.String())
	}
	c := findCheck(t, checks, "anthropic key")
	if c.Status != checkFail || !strings.Contains(c.Detail, "ANTHROPIC_BASE_URL=https://gw.example/v1?REDACTED") || !strings.Contains(c.Detail, "query string") {
		t.Fatalf("anthropic: %+v", c)
	}
}

// The real command on this machine: exit 1 exactly when something
// required is missing.
func TestDoctorExitCode(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CAPSTAN_MODEL", "")
	code, out, _ := captureConfigCLI(t, "doctor")
	wantFail := false
	if _, err := exec.LookPath("git"); err != nil {
		wantFail = true
	}
	if (code == exitNotCompleted) != wantFail || (code != 0 && code != exitNotCompleted) || !strings.Contains(out, "sandbox namespaces") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	t.Setenv("PATH", t.TempDir()) // no git, no interpreters
	code, out, errOut := captureConfigCLI(t, "doctor")
	if code != exitNotCompleted || !strings.Contains(out, "FAIL  git") || !strings.Contains(errOut, "1 required check(s) failed") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
}

// copyHelloWithoutModel copies examples/hello and drops its runner.model.
func copyHelloWithoutModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hello")
	if out, err := exec.Command("cp", "-R", "../../examples/hello", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	s := strings.Replace(string(b), `"model": "script:script.yaml",`, "", 1)
	if s == string(b) {
		t.Fatal("hello's agent.json no longer names script:script.yaml")
	}
	os.WriteFile(p, []byte(s), 0o644)
	return dir
}

func writeUserConfig(t *testing.T, content string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("CAPSTAN_MODEL", "")
	p := filepath.Join(home, "capstan", "config.yaml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// default_model runs an agent whose agent.json names no model; agent.json,
// CAPSTAN_MODEL and --model each win over it.
func TestUserConfigDefaultModelAndPrecedence(t *testing.T) {
	dir := copyHelloWithoutModel(t)
	code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "-q")
	if code == 0 || !strings.Contains(errOut, "no model") {
		t.Fatalf("without any model: exit %d\n%s", code, errOut)
	}
	writeUserConfig(t, "default_model: script:script.yaml\n")
	if code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "-q"); code != 0 {
		t.Fatalf("default_model not used: exit %d\n%s", code, errOut)
	}
	t.Setenv("CAPSTAN_MODEL", "script:from-env.yaml")
	if code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "-q"); code == 0 || !strings.Contains(errOut, "from-env.yaml") {
		t.Fatalf("CAPSTAN_MODEL does not win over the user config: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "-q", "--model", "script:script.yaml"); code != 0 {
		t.Fatalf("--model does not win: exit %d\n%s", code, errOut)
	}
	// agent.json's runner.model wins over the user config.
	writeUserConfig(t, "default_model: script:from-config.yaml\n")
	if code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q"); code != 0 {
		t.Fatalf("the user config overrode runner.model: exit %d\n%s", code, errOut)
	}
}

// A bad value in the user config stops a run that needs it, naming the
// file and the line and column of the value; a run that does not need it
// warns, naming the key, the file and the line, and runs. A file that is
// not YAML stops every run.
func TestUserConfigErrors(t *testing.T) {
	noModel := copyHelloWithoutModel(t)
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	for _, c := range []struct {
		content, text, at string
		needs             []string // the run that needs the value
	}{
		{"default_model: nosuch:model\n", `unknown provider "nosuch"`, ":1:16)", []string{"run", noModel}},
		{"base_urls:\n  openai: ftp://x\n", `base_urls.openai is not an absolute http(s) URL`, ":2:11)", []string{"run", "../../examples/hello", "--model", "openai:gpt-test"}},
		{"base_urls:\n  openai: https://x/v1?key=sk-uc-SECRET\n", "base_urls.openai carries a query string", ":2:11)", []string{"run", "../../examples/hello", "--model", "openai:gpt-test"}},
		{"base_urls:\n  anthropic: https://u:sk-uc-SECRET@x/\n", "base_urls.anthropic carries a user or password", ":2:14)", []string{"run", "../../examples/hello", "--model", "anthropic:claude-test"}},
		{"base_urls:\n  openai: http://x\n  claude-code: http://x\n", "base_urls.claude-code: only anthropic and openai have a base URL", ":3:16", nil},
		{"pricing:\n  gpt-4.1: {input: 1, output: 2}\n  \"m.x\": {input: -1}\n", "pricing.m.x.input: -1 is not a price", ":3:", nil},
	} {
		p := writeUserConfig(t, c.content)
		t.Setenv("OPENAI_API_KEY", "sk-test")
		t.Setenv("ANTHROPIC_API_KEY", "sk-test")
		if c.needs != nil {
			code, _, errOut := captureConfigCLI(t, append(c.needs, "--workdir", t.TempDir(), "-q")...)
			if code != exitUsage || !strings.Contains(errOut, p+c.at) || !strings.Contains(errOut, c.text) || strings.Contains(errOut, "SECRET") {
				t.Errorf("%q, needed: exit %d, want %d naming %s%s\n%s", c.content, code, exitUsage, p, c.at, errOut)
			}
		}
		// examples/hello runs a script model: it needs none of these.
		code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q")
		at := strings.TrimSuffix(strings.SplitN(c.at, ":", 3)[1], ")")
		if code != 0 || !strings.Contains(errOut, "capstan: warning: user config "+p+":"+at+": ") || !strings.Contains(errOut, c.text) || strings.Contains(errOut, "SECRET") {
			t.Errorf("%q, not needed: exit %d, want 0 and a warning naming %s:%s\n%s", c.content, code, p, at, errOut)
		}
	}
	p := writeUserConfig(t, "default_model: [not, a, model]\n")
	if code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q"); code != exitUsage || !strings.Contains(errOut, p) {
		t.Errorf("not the config's shape: exit %d, want %d naming %s\n%s", code, exitUsage, p, errOut)
	}
}

// An unknown key in the user config (a typo) is a warning with the nearest
// known key and the file and line, on every command that reads the file,
// and in capstan doctor; the rest of the file is used.
func TestUserConfigUnknownKeysWarnWithASuggestion(t *testing.T) {
	p := writeUserConfig(t, "default_modle: openai:gpt-5\npricing:\n  script.yaml: {input: 1000, outptu: 0}\ncolour: blue\n")
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q")
	for _, want := range []string{
		"capstan: warning: user config " + p + ":1: unknown key default_modle is ignored; did you mean default_model?\n",
		"capstan: warning: user config " + p + ":3: unknown key pricing.script.yaml.outptu is ignored; did you mean pricing.script.yaml.output?\n",
		"capstan: warning: user config " + p + ":4: unknown key colour is ignored (known keys: default_model, base_urls, pricing)\n",
	} {
		if code != 0 || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, want 0 and %q in:\n%s", code, want, errOut)
		}
	}
	checks := runDoctor(context.Background(), fakeDoctorEnv(map[string]string{}))
	if c := findCheck(t, checks, "user config"); c.Status != checkWarn || !strings.Contains(c.Detail, "did you mean default_model?") {
		t.Errorf("doctor: %+v", c)
	}
}

// base_urls reaches the provider when neither --base-url, the
// environment nor agent.json sets one.
func TestUserConfigBaseURLReachesProvider(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"message":"from the user-config server","type":"invalid_request_error"}}`))
	}))
	defer srv.Close()
	writeUserConfig(t, "base_urls:\n  openai: "+srv.URL+"/v1\n")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q", "--model", "openai:gpt-test", "--json")
	if hits.Load() == 0 || code == 0 {
		t.Fatalf("the configured base URL was not used (exit %d, %d requests):\n%s", code, hits.Load(), errOut)
	}
}

// pricing prices a model for every agent; an agent's own runner.pricing
// for the same model wins.
func TestUserConfigPricing(t *testing.T) {
	writeUserConfig(t, "pricing:\n  script.yaml: {input: 1000, output: 0}\n")
	// costPerInputToken runs dir and returns cost / input tokens × 1e6.
	costPerInputToken := func(dir string) float64 {
		t.Helper()
		code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "-q", "--json")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		var res struct {
			Cost  float64 `json:"cost"`
			Usage struct {
				InputTokens int64 `json:"input_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Usage.InputTokens == 0 {
			t.Fatalf("%v\n%s", err, out)
		}
		return math.Round(res.Cost / float64(res.Usage.InputTokens) * 1e6)
	}
	if got := costPerInputToken("../../examples/hello"); got != 1000 {
		t.Fatalf("$%v per million input tokens, want the user config's 1000", got)
	}
	dir := filepath.Join(t.TempDir(), "hello")
	exec.Command("cp", "-R", "../../examples/hello", dir).Run()
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), `"runner": {`, `"runner": {"pricing": {"script.yaml": {"input": 2000, "output": 0}},`, 1)), 0o644)
	if got := costPerInputToken(dir); got != 2000 {
		t.Fatalf("$%v per million input tokens, want agent.json's own 2000", got)
	}
	// A bad price of the run's own model stops it.
	writeUserConfig(t, "pricing:\n  script.yaml: {input: -1, output: 2}\n")
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q")
	if code != exitUsage || !strings.Contains(errOut, "pricing.script.yaml.input: -1 is not a price") {
		t.Fatalf("negative price: exit %d\n%s", code, errOut)
	}
}

// A CAPSTAN_MODEL whose provider capstan does not know fails the default
// model check (every run without --model would stop with
// UNKNOWN_PROVIDER), naming the providers to choose from; the user
// config's default_model is checked when the file is read.
func TestDoctorFailsAnUnknownDefaultProvider(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	c := findCheck(t, runDoctor(context.Background(), fakeDoctorEnv(map[string]string{"CAPSTAN_MODEL": "gemini:pro"})), "default model")
	if c.Status != checkFail || !strings.Contains(c.Detail, `from CAPSTAN_MODEL): unknown model provider "gemini"`) || !strings.Contains(c.Hint, "set CAPSTAN_MODEL to provider:model") || !strings.Contains(c.Hint, "script") {
		t.Fatalf("CAPSTAN_MODEL=gemini:pro: %+v", c)
	}
	c = findCheck(t, runDoctor(context.Background(), fakeDoctorEnv(map[string]string{"CAPSTAN_MODEL": "script:s.yaml"})), "default model")
	if c.Status != checkOK {
		t.Fatalf("CAPSTAN_MODEL=script:s.yaml: %+v", c)
	}
}

// A user config that is not YAML of the known shape stops the run with
// CONFIG_PARSE, the message and the file:line:col, and prints none of the
// file's bytes: not a terminal escape it holds, not binary garbage. A file
// whose aliases expand past the YAML node budget is refused like every
// other YAML capstan reads, before it is decoded.
func TestUserConfigThatIsNotYAMLIsReportedWithoutItsBytes(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		{"default_model: [a\n\x1b]0;TITLE\x07\x1b[31mRED\n", ":2:"},
		{"\xff\xfe\x1b[2Jgarbage\x00\x01", "is not UTF-8 text"},
		{yamlsafe.MergeBomb(40), "YAML expands to more than"},
	} {
		p := writeUserConfig(t, c.content)
		code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q")
		if code != exitUsage || !strings.Contains(errOut, "capstan: CONFIG_PARSE: user config") || !strings.Contains(errOut, p) || !strings.Contains(errOut, c.want) {
			t.Errorf("exit %d, want CONFIG_PARSE naming %s and %q:\n%q", code, p, c.want, errOut)
		}
		if strings.ContainsAny(errOut, "\x1b\x00\xff") || strings.Contains(errOut, "RED") || strings.Contains(errOut, "garbage") {
			t.Errorf("the error prints the file's bytes:\n%q", errOut)
		}
	}
}
