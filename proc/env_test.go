package proc

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// hostEnviron is a user's environment: the base, toolchain settings, and
// credentials of every kind, most under names no secret rule knows.
var hostEnviron = []string{
	"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C",
	"GOFLAGS=-mod=vendor", "GOPROXY=https://proxy.internal", "GOPRIVATE=example.com/*", "GONOSUMDB=example.com",
	"GOCACHE=/home/u/.cache/go-build", "VIRTUAL_ENV=/work/app/.venv", "PYTHONPATH=/work/app/src",
	"NODE_OPTIONS=--max-old-space-size=4096", "npm_config_registry=https://npm.internal", "CARGO_HOME=/home/u/.cargo",
	"RUSTFLAGS=-Dwarnings",
	// Credentials a name rule may not know, and some it does.
	"ANTHROPIC_API_KEY=sk-ant-host-0123456789", "OPENAI_API_KEY=sk-openai-0123456789", "GH_TOKEN=ghp_host0123456789",
	"PGPASSWORD=pg-host-password", "MYSQL_PWD=mysql-host-password", "SSHPASS=ssh-host-password",
	"SENTRY_DSN=https://abc123@o1.ingest.sentry.io/42", "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T/B/XYZ",
	"OP_SESSION_my=op-session-0123456789", "BW_SESSION=bw-session-0123456789",
	"DATABASE_URL=postgres://app:db-pass@db/x", "VAULT_ADDR_AND_ROLE=https://vault/roleid=s3cr3t",
	"AWS_ACCESS_KEY_ID=AKIAHOST", "AWS_SECRET_ACCESS_KEY=aws-host-secret", "npm_config__authToken=npm-host-token",
	"GOPROXY_WITH_AUTH=x", "HTTPS_PROXY=http://user:proxy-pass@proxy:3128", "NO_PROXY=localhost",
}

func names(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k)
	}
	return out
}

// TestForCommandsIsAnAllowList: a command gets the base, the toolchain
// variables and what the allow-list names, and nothing else of capstan's
// environment — a credential under a name no rule knows is unreachable.
func TestForCommandsIsAnAllowList(t *testing.T) {
	env := ForCommands(hostEnviron, []string{"GH_TOKEN", "CI=true"})
	want := []string{"CARGO_HOME", "CI", "GH_TOKEN", "GOCACHE", "GOFLAGS", "GONOSUMDB", "GOPRIVATE", "GOPROXY", "HOME",
		"LANG", "LC_ALL", "NODE_OPTIONS", "NO_PROXY", "PATH", "PYTHONPATH", "RUSTFLAGS", "VIRTUAL_ENV", "npm_config_registry"}
	if got := names(env); !slices.Equal(got, want) {
		t.Errorf("ForCommands passed %v\nwant %v", got, want)
	}
	for _, kv := range env {
		for _, secret := range []string{"sk-ant", "pg-host", "mysql-host", "ssh-host", "abc123", "XYZ", "op-session", "bw-session", "db-pass", "s3cr3t", "aws-host", "npm-host", "proxy-pass"} {
			if strings.Contains(kv, secret) {
				t.Errorf("%s reached a command", kv)
			}
		}
	}
	// Without an allow-list, GH_TOKEN stays out too.
	if slices.Contains(names(ForCommands(hostEnviron, nil)), "GH_TOKEN") {
		t.Error("GH_TOKEN passed without being allowed")
	}
}

// TestToolchainSecretsAreNotPassed: a toolchain variable whose value is a
// secret (a proxy with a password) is not passed, nor is a toolchain
// variable a pattern would match but that holds a credential.
func TestToolchainSecretsAreNotPassed(t *testing.T) {
	env := ForCommands([]string{"GOPROXY=https://u:hunter22@proxy.internal", "PIP_INDEX_URL=https://u:pipsecret@pypi.internal/simple", "GOFLAGS=-v"}, []string{"GO*"})
	if got := strings.Join(env, " "); got != "GOFLAGS=-v" {
		t.Errorf("ForCommands = %s", got)
	}
}

// TestHelpersGetOnlyTheirOwnKeys: gh gets its token and no provider key;
// the claude CLI gets its key and no other credential; git's minimal base
// holds none.
func TestHelpersGetOnlyTheirOwnKeys(t *testing.T) {
	gh := ForGitHubCLI(hostEnviron)
	if !slices.Contains(gh, "GH_TOKEN=ghp_host0123456789") {
		t.Errorf("gh lacks its token: %v", gh)
	}
	claude := ForClaudeCLI(hostEnviron, nil)
	if !slices.Contains(claude, "ANTHROPIC_API_KEY=sk-ant-host-0123456789") {
		t.Errorf("claude lacks its key: %v", claude)
	}
	minimal := Minimal(hostEnviron)
	if got := strings.Join(names(minimal), " "); got != "HOME LANG LC_ALL PATH" {
		t.Errorf("Minimal = %s", got)
	}
	for who, env := range map[string][]string{"gh": gh, "claude": claude, "git": minimal} {
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			if (who != "claude" && (k == "ANTHROPIC_API_KEY" || k == "OPENAI_API_KEY")) ||
				(who != "gh" && k == "GH_TOKEN") || strings.HasPrefix(k, "AWS_") || k == "PGPASSWORD" || k == "DATABASE_URL" {
				t.Errorf("%s got %s", who, k)
			}
		}
	}
	// A CLI set to use Bedrock gets the AWS credentials it needs.
	bedrock := ForClaudeCLI(append(slices.Clone(hostEnviron), "CLAUDE_CODE_USE_BEDROCK=1"), nil)
	if !slices.Contains(bedrock, "AWS_SECRET_ACCESS_KEY=aws-host-secret") || slices.Contains(names(bedrock), "OPENAI_API_KEY") {
		t.Errorf("bedrock claude env: %v", names(bedrock))
	}
}

// TestKeptInOwnBlock: capstan's environment block keeps what its
// commands get by default and nothing else.
func TestKeptInOwnBlock(t *testing.T) {
	for kv, want := range map[string]bool{
		"PATH=/bin": true, "GOFLAGS=-v": true, "LC_CTYPE=C": true, "ANTHROPIC_API_KEY=x": false, "PGPASSWORD=x": false,
		"SENTRY_DSN=https://k@h/1": false, "MY_UNKNOWN_THING=x": false, "HOME=postgres://u:p@h/x": false, "CAPSTAN_MODEL=x": false,
	} {
		k, v, _ := strings.Cut(kv, "=")
		if got := KeptInOwnBlock(k, v); got != want {
			t.Errorf("KeptInOwnBlock(%s) = %v", kv, got)
		}
	}
}

// TestToolchainListIsDocumented: docs/tools.md lists every toolchain
// variable the code passes (the list is written once, in code).
func TestToolchainListIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/tools.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, tc := range Toolchains() {
		for _, v := range tc.Vars {
			if !strings.Contains(doc, "`"+v.Name+"`") {
				t.Errorf("docs/tools.md does not list the %s toolchain variable %s", tc.Ecosystem, v.Name)
			}
		}
	}
	for _, n := range BaseNames() {
		if !strings.Contains(doc, "`"+n+"`") {
			t.Errorf("docs/tools.md does not list the base variable %s", n)
		}
	}
}
