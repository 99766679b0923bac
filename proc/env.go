package proc

import (
	"slices"
	"sort"
	"strings"
)

// base lists the variables every process capstan starts gets from its
// environment (besides the LC_* locale variables): what shells, compilers
// and test runners need to work, and nothing that identifies a service or
// an account.
var base = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"}

// BaseNames returns the minimal base: the variables every process capstan
// starts gets from capstan's environment, LC_* besides.
func BaseNames() []string { return slices.Clone(base) }

// VarKind says what a toolchain variable's value is, which decides what a
// sandbox keeps of it.
type VarKind int

const (
	// VarSetting is a setting (GOFLAGS, RUSTFLAGS).
	VarSetting VarKind = iota
	// VarDir names a directory the toolchain reads (VIRTUAL_ENV, GOROOT).
	VarDir
	// VarDirList is a list of directories, separated as PATH is
	// (PYTHONPATH, NODE_PATH).
	VarDirList
	// VarCacheDir names a directory the toolchain writes (GOCACHE,
	// CARGO_HOME).
	VarCacheDir
)

// ToolchainVar is a toolchain variable.
type ToolchainVar struct {
	Name string
	Kind VarKind
}

// Toolchain is the variables of one ecosystem that the model's commands
// get by default.
type Toolchain struct {
	// Ecosystem names it ("Go", "Python", …).
	Ecosystem string
	// Vars are its variables.
	Vars []ToolchainVar
}

func values(names ...string) []ToolchainVar {
	out := make([]ToolchainVar, len(names))
	for i, n := range names {
		out[i] = ToolchainVar{Name: n}
	}
	return out
}

// toolchains are the documented, non-secret variables with which a user
// sets up a toolchain. Variables that carry credentials (GOAUTH, npm's
// _authToken, CARGO_REGISTRIES_*_TOKEN, PIP_INDEX_URL with a password in
// it) are not among them, and a listed variable whose value is a secret
// (a proxy URL with a password) is not passed either.
var toolchains = []Toolchain{
	{"Go", append(values("GOFLAGS", "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOSUMDB",
		"GOINSECURE", "GOTOOLCHAIN", "GOEXPERIMENT", "GODEBUG", "GOOS", "GOARCH", "GOAMD64", "GOARM", "GOARM64",
		"GO386", "GOWORK", "GOTELEMETRY", "GOFIPS140", "GOGC", "GOMAXPROCS", "GOMEMLIMIT", "CGO_ENABLED",
		"CGO_CFLAGS", "CGO_CPPFLAGS", "CGO_CXXFLAGS", "CGO_LDFLAGS", "CC", "CXX", "PKG_CONFIG_PATH"),
		ToolchainVar{"GOROOT", VarDir}, ToolchainVar{"GOPATH", VarCacheDir}, ToolchainVar{"GOCACHE", VarCacheDir}, ToolchainVar{"GOMODCACHE", VarCacheDir}, ToolchainVar{"GOTMPDIR", VarCacheDir})},
	{"Python", append(values("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONWARNINGS",
		"PYTHONIOENCODING", "PYTHONUTF8", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTEST_ADDOPTS", "PIP_INDEX_URL",
		"PIP_EXTRA_INDEX_URL", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK", "UV_INDEX_URL", "UV_PYTHON",
		"CONDA_DEFAULT_ENV"),
		ToolchainVar{"VIRTUAL_ENV", VarDir}, ToolchainVar{"CONDA_PREFIX", VarDir}, ToolchainVar{"PYTHONHOME", VarDir}, ToolchainVar{"PYTHONPATH", VarDirList},
		ToolchainVar{"PIP_CACHE_DIR", VarCacheDir}, ToolchainVar{"UV_CACHE_DIR", VarCacheDir})},
	{"Node", append(values("NODE_OPTIONS", "NODE_ENV", "NODE_EXTRA_CA_CERTS", "npm_config_registry",
		"npm_config_strict_ssl", "npm_config_cafile", "npm_config_fund", "npm_config_audit",
		"npm_config_update_notifier", "npm_config_loglevel", "npm_config_offline", "npm_config_prefer_offline"),
		ToolchainVar{"NODE_PATH", VarDirList}, ToolchainVar{"npm_config_prefix", VarDir}, ToolchainVar{"PNPM_HOME", VarDir},
		ToolchainVar{"npm_config_cache", VarCacheDir}, ToolchainVar{"YARN_CACHE_FOLDER", VarCacheDir})},
	{"Rust", append(values("RUSTFLAGS", "RUSTDOCFLAGS", "RUSTUP_TOOLCHAIN", "CARGO_BUILD_JOBS", "CARGO_INCREMENTAL",
		"CARGO_TERM_COLOR", "CARGO_NET_OFFLINE", "RUST_BACKTRACE"),
		ToolchainVar{"RUSTUP_HOME", VarDir}, ToolchainVar{"CARGO_HOME", VarCacheDir}, ToolchainVar{"CARGO_TARGET_DIR", VarCacheDir})},
	{"Network", values("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy",
		"all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")},
}

// Toolchains returns the toolchain variables the model's commands get by
// default, by ecosystem (a copy).
func Toolchains() []Toolchain {
	out := make([]Toolchain, len(toolchains))
	for i, t := range toolchains {
		out[i] = Toolchain{Ecosystem: t.Ecosystem, Vars: slices.Clone(t.Vars)}
	}
	return out
}

// LookupToolchainVar returns the toolchain variable called name.
func LookupToolchainVar(name string) (ToolchainVar, bool) {
	for _, t := range toolchains {
		for _, v := range t.Vars {
			if v.Name == name {
				return v, true
			}
		}
	}
	return ToolchainVar{}, false
}

func inBase(name string) bool {
	return slices.Contains(base, name) || strings.HasPrefix(name, "LC_")
}

// Minimal returns the minimal base of environ ("NAME=value" entries, as
// from os.Environ): its base variables and LC_* that are not secrets,
// sorted by name.
func Minimal(environ []string) []string {
	return build(environ, inBase, nil)
}

// ForCommands returns the environment of the commands the model runs or
// makes capstan run (Bash, command validators, subprocess steps, MCP
// servers): the minimal base and the toolchain variables of environ that
// are not secrets, plus the entries of allow (runner.boundaries.env):
//
//   - "NAME" copies NAME from environ, secret or not (the way to hand a
//     command GH_TOKEN on purpose);
//   - "PREFIX*" copies every variable whose name starts with PREFIX,
//     except secrets (list those by name);
//   - "NAME=value" sets NAME.
//
// Nothing else of environ is passed. The result is sorted by name.
func ForCommands(environ, allow []string) []string {
	return build(environ, func(k string) bool {
		_, tc := LookupToolchainVar(k)
		return tc || inBase(k)
	}, allow)
}

// KeptInOwnBlock reports whether capstan's own environment block (what
// /proc/<pid>/environ shows of the capstan process) keeps the variable:
// only what ForCommands passes by default does; every other value is
// wiped at start-up (capstan keeps its own copy).
func KeptInOwnBlock(name, value string) bool {
	if IsSecret(name, value) {
		return false
	}
	_, tc := LookupToolchainVar(name)
	return tc || inBase(name)
}

// gitHubCLI are the variables gh reads for its credentials, host and
// configuration.
var gitHubCLI = []string{"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "GH_HOST",
	"GH_CONFIG_DIR", "XDG_CONFIG_HOME", "GH_NO_UPDATE_NOTIFIER", "GH_PROMPT_DISABLED"}

// ForGitHubCLI returns the environment of the gh calls capstan makes for
// itself: the minimal base, the network settings, and gh's own variables
// (its token among them, which only gh gets).
func ForGitHubCLI(environ []string) []string {
	return build(environ, func(k string) bool {
		return inBase(k) || isNetwork(k)
	}, gitHubCLI)
}

// claudeCLIPrefixes are the variables of the claude CLI's own settings,
// its key among them.
var claudeCLIPrefixes = []string{"ANTHROPIC_", "CLAUDE_", "DISABLE_", "MAX_THINKING_TOKENS", "MCP_TIMEOUT",
	"MCP_TOOL_TIMEOUT", "BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS", "BASH_MAX_OUTPUT_LENGTH"}

// cloudPrefixes are the credentials of the cloud platforms the claude CLI
// reaches the model through, passed only when the CLI is set to use one
// (CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_USE_VERTEX).
var cloudPrefixes = map[string][]string{
	"CLAUDE_CODE_USE_BEDROCK": {"AWS_"},
	"CLAUDE_CODE_USE_VERTEX":  {"GOOGLE_", "CLOUDSDK_", "CLOUD_ML_REGION", "VERTEX_REGION_"},
}

// ForClaudeCLI returns the environment of the claude CLI: what
// ForCommands passes (its Bash tool runs the model's commands), plus its
// own settings and key (ANTHROPIC_*, CLAUDE_*, …) and, for a CLI set to
// reach the model through Bedrock or Vertex, that platform's variables.
func ForClaudeCLI(environ, allow []string) []string {
	host := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			host[k] = v
		}
	}
	prefixes := slices.Clone(claudeCLIPrefixes)
	for flag, more := range cloudPrefixes {
		if v := host[flag]; v != "" && v != "0" && !strings.EqualFold(v, "false") {
			prefixes = append(prefixes, more...)
		}
	}
	var own []string
	for k := range host {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				own = append(own, k)
				break
			}
		}
	}
	sort.Strings(own)
	return ForCommands(environ, append(own, allow...))
}

func isNetwork(name string) bool {
	for _, t := range toolchains {
		if t.Ecosystem == "Network" {
			return slices.ContainsFunc(t.Vars, func(v ToolchainVar) bool { return v.Name == name })
		}
	}
	return false
}

// build keeps the variables of environ that keep says are passed by
// default and are not secrets, then applies allow (see ForCommands).
func build(environ []string, keep func(string) bool, allow []string) []string {
	vars := map[string]string{}
	host := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		host[k] = v
		if keep(k) && !IsSecret(k, v) {
			vars[k] = v
		}
	}
	for _, kv := range allow {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case k == "":
		case ok:
			vars[k] = v
		case strings.HasSuffix(k, "*"):
			prefix := strings.TrimSuffix(k, "*")
			for hk, hv := range host {
				if strings.HasPrefix(hk, prefix) && !IsSecret(hk, hv) {
					vars[hk] = hv
				}
			}
		default:
			if hv, present := host[k]; present {
				vars[k] = hv
			}
		}
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// ProviderKeyNames are the variables that hold a model provider's key:
// what an unsandboxed run must not find in the environment of a process
// that started capstan.
var providerKeyNames = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY"}

// ProviderKeyNames returns the variables that hold a model provider's key
// (ANTHROPIC_API_KEY, OPENAI_API_KEY, …).
func ProviderKeyNames() []string { return slices.Clone(providerKeyNames) }
