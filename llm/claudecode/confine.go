package claudecode

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/mcp"
)

// defaultEndpoint is where the CLI reaches the model when
// ANTHROPIC_BASE_URL says nothing.
const defaultEndpoint = "https://api.anthropic.com"

// cliSandboxSettings turns on the CLI's own sandbox (its settings'
// sandbox.enabled) in a sandboxed run.
const cliSandboxSettings = `{"sandbox":{"enabled":true}}`

// credentialsFile is the file of a claude CLI login in its configuration
// folder.
const credentialsFile = ".credentials.json"

// privateHome makes the private configuration folder of a sandboxed CLI:
// the CLI keeps its sessions and settings there instead of in the user's
// ~/.claude, which the sandbox does not expose. A user logged in with
// `claude login` (no ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN) has the
// login's credentials file copied in, and nothing else of the user's
// folder.
func privateHome(getenv func(string) string) (string, error) {
	dir, err := os.MkdirTemp("", "capstan-claude-")
	if err != nil {
		return "", agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the claude CLI's private configuration folder")
	}
	if getenv("ANTHROPIC_API_KEY") != "" || getenv("ANTHROPIC_AUTH_TOKEN") != "" {
		return dir, nil
	}
	src := getenv("CLAUDE_CONFIG_DIR")
	if src == "" {
		if h := getenv("HOME"); h != "" {
			src = filepath.Join(h, ".claude")
		}
	}
	if src == "" {
		return dir, nil
	}
	if b, err := os.ReadFile(filepath.Join(src, credentialsFile)); err == nil {
		if err := os.WriteFile(filepath.Join(dir, credentialsFile), b, 0o600); err != nil {
			os.RemoveAll(dir)
			return "", agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "copy the claude login into the CLI's private configuration folder")
		}
	}
	return dir, nil
}

// Endpoint is the host:port a claude CLI with the environment getenv and
// the base URL override baseURL reaches the model at: ANTHROPIC_BASE_URL's
// (default port of its scheme when it names none), else the Anthropic API's.
func Endpoint(baseURL string, getenv func(string) string) (string, error) {
	u, err := endpointURL(baseURL, getenv)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// endpointURL is the base URL a claude CLI with the environment getenv
// and the base URL override baseURL reaches the model at.
func endpointURL(baseURL string, getenv func(string) string) (*url.URL, error) {
	if baseURL == "" {
		baseURL = getenv("ANTHROPIC_BASE_URL")
	}
	if baseURL == "" {
		baseURL = defaultEndpoint
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" || u.Scheme != "http" && u.Scheme != "https" {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"the model endpoint %q is not an http(s) URL", baseURL)
		e.Hint = "set ANTHROPIC_BASE_URL (or --base-url) to a URL such as https://gateway.example.com"
		return nil, e
	}
	return u, nil
}

// sandboxSpec is the confined program of argv: the work dir and the
// private configuration folder writable, the CLI's install (and its
// interpreter's, and those of its stdio MCP servers) readable, the
// model's endpoint reachable.
func (b *Bridge) sandboxSpec(argv []string) (tool.ProgramSpec, error) {
	wd := b.cfg.WorkDir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return tool.ProgramSpec{}, err
		}
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return tool.ProgramSpec{}, err
	}
	endpoint, err := Endpoint(b.cfg.BaseURL, b.cfg.Getenv)
	if err != nil {
		return tool.ProgramSpec{}, err
	}
	var readable []string
	for _, p := range b.binary {
		readable = append(readable, sandbox.InstallRoots(p, b.cfg.Getenv("PATH"), wd)...)
	}
	// The stdio MCP servers the CLI starts run in its sandbox: they read
	// their installs as capstan's own sandboxed servers do.
	for _, s := range b.cfg.MCPServers {
		readable = append(readable, mcp.InstallRoots(s, wd)...)
	}
	env := lastWins(append(b.env(), "CLAUDE_CONFIG_DIR="+b.home))
	if keys := credentials(env); len(keys) > 0 && !viaCloudPlatform(env) {
		// The key stays in capstan: the CLI (and all it runs) gets a
		// stand-in, and reaches the model only through the key proxy.
		kp, err := b.proxyKeys(keys)
		if err != nil {
			return tool.ProgramSpec{}, err
		}
		env, endpoint = kp.standIn(env), kp.addr
	}
	return tool.ProgramSpec{Argv: argv, Dir: wd, Env: env, ReadOnly: readable, Writable: []string{b.home},
		NetworkAllow: []string{endpoint}}, nil
}

// proxyKeys returns the Bridge's key proxy, started at its first
// sandboxed query, to the model endpoint with keys.
func (b *Bridge) proxyKeys(keys map[string]string) (*keyProxy, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys != nil {
		return b.keys, nil
	}
	target, err := endpointURL(b.cfg.BaseURL, b.cfg.Getenv)
	if err != nil {
		return nil, err
	}
	if b.keys, err = startKeyProxy(target, keys); err != nil {
		return nil, err
	}
	return b.keys, nil
}

// viaCloudPlatform reports whether env sets the CLI to reach the model
// through Bedrock or Vertex, whose credentials are not an Anthropic key.
func viaCloudPlatform(env []string) bool {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if (k == "CLAUDE_CODE_USE_BEDROCK" || k == "CLAUDE_CODE_USE_VERTEX") && v != "" && v != "0" {
			return true
		}
	}
	return false
}

// lastWins keeps the last entry of each variable of env, in the order of
// the first.
func lastWins(env []string) []string {
	last := map[string]string{}
	var order []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = v
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+last[k])
	}
	return out
}
