package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/modelspec"
)

// userConfig is the user's own defaults, from
// $XDG_CONFIG_HOME/capstan/config.yaml (~/.config/capstan/config.yaml when
// XDG_CONFIG_HOME is unset):
//
//	default_model: anthropic:claude-sonnet-4-5
//	base_urls:
//	  openai: http://localhost:11434/v1
//	pricing:
//	  my-finetune: {input: 3, output: 15}
//
// Precedence, first wins: the command-line flag, the environment
// (CAPSTAN_MODEL; OPENAI_BASE_URL, ANTHROPIC_BASE_URL), the agent's
// agent.json (runner.model, runner.baseUrl, runner.pricing), this file.
type userConfig struct {
	// DefaultModel is the model of an agent whose agent.json names none,
	// and of `skills run` without --model.
	DefaultModel string `yaml:"default_model"`
	// BaseURLs are API base URLs per provider (anthropic, openai).
	BaseURLs map[string]string `yaml:"base_urls"`
	// Pricing adds or replaces model prices (USD per million tokens) for
	// every agent; an agent's runner.pricing entry for the same model wins.
	Pricing map[string]modelspec.Price `yaml:"pricing"`

	path string
	// problems are the errors of bad values by key (problemKeys in the
	// file's order); needed marks those a run stopped on.
	problems    map[string]error
	problemKeys []string
	needed      map[string]bool
	// warnings are the unknown keys, each a line with a suggestion.
	warnings []string
}

// baseURLEnv is the environment variable that sets each provider's base
// URL, which wins over the user config.
var baseURLEnv = map[string]string{"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}

// userConfigPath is where the user config file lives.
func userConfigPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "capstan", "config.yaml")
}

// userConfigKeys are the user config's keys, and priceKeys the keys of
// one model's prices under pricing.
var (
	userConfigKeys = []string{"default_model", "base_urls", "pricing"}
	priceKeys      = []string{"input", "output", "cacheRead", "cacheWrite"}
)

// loadUserConfig reads the user config; a missing file is an empty config,
// one that is not YAML of the config's shape a configuration error naming
// the file and line. The file is optional and a run needs little of it:
// an unknown key (a typo: default_modle) is a warning with the nearest
// known key, and a bad value is an error only for the run that uses it
// (see userConfig.need) — for every other it is a warning naming the
// key, the file and the line, and the value is left out.
func loadUserConfig() (*userConfig, error) {
	path := userConfigPath()
	uc := &userConfig{path: path}
	if path == "" {
		return uc, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return uc, nil
	}
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, "user config %s", path)
	}
	var raw map[string]any
	if !utf8.Valid(data) {
		err = errors.New("the file is not UTF-8 text")
	} else if err = yamlsafe.Unmarshal(data, &raw); err == nil {
		err = yamlsafe.Unmarshal(data, uc)
	}
	if err != nil {
		// The message and its position, as for every other YAML file:
		// not the decoder's rendering of the file's lines, which would
		// print whatever bytes the file holds on the terminal.
		e := agenterr.New(agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, "user config %s: %s", path, err.Error())
		var ye yaml.Error
		if errors.As(err, &ye) {
			e.Message = "user config: " + ye.GetMessage()
			if tk := ye.GetToken(); tk != nil {
				e.File, e.Line, e.Column = path, tk.Position.Line, tk.Position.Column
			}
		}
		e.Hint = "known keys: " + strings.Join(userConfigKeys, ", ") + " (see docs/cli.md#user-config)"
		return nil, e
	}
	// Each value's error names the file and the line and column of the
	// value, as a parse error does.
	located := func(err error, keys ...string) error {
		e := agenterr.From(err)
		if e == nil {
			return err
		}
		at := *e
		at.File = path
		at.Line, at.Column = yamlPosition(data, keys...)
		return &at
	}
	uc.warnUnknown(data, raw)
	if uc.DefaultModel != "" {
		if provider, _ := modelspec.Parse(uc.DefaultModel); !slices.Contains(llm.Providers(), provider) {
			e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"user config default_model %q: unknown provider %q", uc.DefaultModel, provider)
			e.Hint = "write provider:model with one of: " + strings.Join(llm.Providers(), ", ")
			uc.addProblem("default_model", located(e, "default_model"))
			uc.DefaultModel = ""
		}
	}
	for _, provider := range slices.Sorted(maps.Keys(uc.BaseURLs)) {
		key := "base_urls." + provider
		if _, ok := baseURLEnv[provider]; !ok {
			uc.addProblem(key, located(agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"user config %s: only %s have a base URL", key, strings.Join(slices.Sorted(maps.Keys(baseURLEnv)), " and ")),
				"base_urls", provider))
			delete(uc.BaseURLs, provider)
			continue
		}
		// The URL is never quoted: it may hold a key (which the check
		// refuses, as runs record the base URL).
		if err := llm.CheckBaseURL("user config "+key, uc.BaseURLs[provider]); err != nil {
			uc.addProblem(key, located(err, "base_urls", provider))
			delete(uc.BaseURLs, provider)
		}
	}
	for _, model := range slices.Sorted(maps.Keys(uc.Pricing)) {
		p := uc.Pricing[model]
		for _, f := range []struct {
			name string
			v    float64
		}{{"input", p.Input}, {"output", p.Output}, {"cacheRead", p.CacheRead}, {"cacheWrite", p.CacheWrite}} {
			if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
				uc.addProblem("pricing."+model, located(agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
					"user config pricing.%s.%s: %v is not a price (USD per million tokens, ≥ 0)", model, f.name, f.v),
					"pricing", model, f.name))
				delete(uc.Pricing, model)
				break
			}
		}
	}
	return uc, nil
}

// addProblem records the error of the value at key, which the run stops
// on only when it needs that value.
func (uc *userConfig) addProblem(key string, err error) {
	if uc.problems == nil {
		uc.problems = map[string]error{}
	}
	uc.problems[key] = err
	uc.problemKeys = append(uc.problemKeys, key)
}

// need is the error of the value at key ("default_model",
// "base_urls.openai") for a run that uses it, nil when the value is good
// or absent; the error is then no warning.
func (uc *userConfig) need(key string) error {
	err := uc.problems[key]
	if err != nil {
		if uc.needed == nil {
			uc.needed = map[string]bool{}
		}
		uc.needed[key] = true
	}
	return err
}

// warnUnknown records a warning for every key of the document raw (the
// file's text data) that the user config does not have — at the top and in
// a model's prices —, with the nearest known key when one is close.
func (uc *userConfig) warnUnknown(data []byte, raw map[string]any) {
	warn := func(name string, known []string, keys ...string) {
		line, _ := yamlPosition(data, keys...)
		msg := fmt.Sprintf("%s:%d: unknown key %s is ignored", uc.path, line, name)
		if near := nearestWord(keys[len(keys)-1], known); near != "" {
			msg += fmt.Sprintf("; did you mean %s?", strings.TrimSuffix(name, keys[len(keys)-1])+near)
		} else {
			msg += " (known keys: " + strings.Join(known, ", ") + ")"
		}
		uc.warnings = append(uc.warnings, msg)
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(userConfigKeys, k) {
			warn(k, userConfigKeys, k)
		}
	}
	pricing, _ := raw["pricing"].(map[string]any)
	for _, model := range slices.Sorted(maps.Keys(pricing)) {
		prices, _ := pricing[model].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(prices)) {
			if !slices.Contains(priceKeys, k) {
				warn("pricing."+model+"."+k, priceKeys, "pricing", model, k)
			}
		}
	}
}

// Warnings are the lines to print before a run that reads the user config:
// its unknown keys, and the bad values the run did not need (left out).
func (uc *userConfig) Warnings() []string {
	out := slices.Clone(uc.warnings)
	for _, k := range uc.problemKeys {
		if uc.needed[k] {
			continue
		}
		msg := uc.problems[k].Error()
		if e := agenterr.From(uc.problems[k]); e != nil && e.File != "" {
			msg = fmt.Sprintf("%s:%d: %s (left out)", e.File, e.Line, e.Message)
		}
		out = append(out, msg)
	}
	return out
}

// yamlPosition is the line and column of the value at keys in the YAML
// document data (0, 0 when it is not found).
func yamlPosition(data []byte, keys ...string) (line, col int) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return 0, 0
	}
	b := (&yaml.PathBuilder{}).Root()
	for _, k := range keys {
		b = b.Child(k)
	}
	n, err := b.Build().FilterFile(f)
	if err != nil || n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0, 0
	}
	pos := n.GetToken().Position
	return pos.Line, pos.Column
}

// withUserPricing returns def with the user config's prices added to
// runner.pricing for the models agent.json does not price itself. A bad
// price of model (the run's provider:model, "" = the agent's) that
// agent.json does not price stops the run.
func withUserPricing(def *agentdir.Agent, model string) (*agentdir.Agent, error) {
	uc, err := loadUserConfig()
	if err != nil {
		return def, err
	}
	if model == "" {
		model = def.Definition().Runner.Model
	}
	if _, name := modelspec.Parse(model); name != "" {
		if _, own := def.Definition().Runner.Pricing[name]; !own {
			if err := uc.need("pricing." + name); err != nil {
				return def, err
			}
		}
	}
	if len(uc.Pricing) == 0 {
		return def, nil
	}
	d := def.Definition()
	if d.Runner.Pricing == nil {
		d.Runner.Pricing = map[string]modelspec.Price{}
	}
	for model, p := range uc.Pricing {
		if _, ok := d.Runner.Pricing[model]; !ok {
			d.Runner.Pricing[model] = p
		}
	}
	return agentdir.NewAgent(def.Dir(), d, def.Registry(), agent.ValidateOptions())
}

// loadPinnedWithDefaults pins the agent folder with the script file of the
// model the run will use: the --model flag, else CAPSTAN_MODEL, else — when
// agent.json names no model — the user config's default_model.
func loadPinnedWithDefaults(dir, flagModel string) (*agentdir.Agent, error) {
	model := flagModel
	if model == "" {
		model = os.Getenv("CAPSTAN_MODEL")
	}
	def, err := agent.LoadPinned(dir, model)
	if err != nil || model != "" || def.Definition().Runner.Model != "" {
		return def, err
	}
	uc, err := loadUserConfig()
	if err != nil {
		return def, err
	}
	if err := uc.need("default_model"); err != nil || uc.DefaultModel == "" {
		return def, err
	}
	return agent.LoadPinned(dir, uc.DefaultModel)
}

// applyUserDefaults fills what the flags, the environment and agent.json
// left open: the model (flag > CAPSTAN_MODEL > runner.model > default_model)
// and the base URL (flag > <PROVIDER>_BASE_URL > runner.baseUrl > base_urls,
// see baseURLFor); rerun is the command that runs again with more flags,
// for the hint of an unconfirmed endpoint.
func applyUserDefaults(flags *runFlags, def *agentdir.Agent, rerun func(extra ...string) string) error {
	if flags.model == "" {
		flags.model = os.Getenv("CAPSTAN_MODEL")
	}
	runner := def.Definition().Runner
	uc, err := loadUserConfig()
	if err != nil {
		return err
	}
	if flags.model == "" && runner.Model == "" {
		if err := uc.need("default_model"); err != nil {
			return err
		}
		flags.model = uc.DefaultModel
	}
	model := flags.model
	if model == "" {
		model = runner.Model
	}
	if flags.baseURL == "" && runner.BaseURL == "" {
		u, err := uc.baseURLFor(model)
		if e := agenterr.From(err); e != nil && e.Code == agenterr.CodeEndpointUnconfirmed && rerun != nil {
			e.Hint = "if it is yours, confirm it with: " + rerun("--base-url", u) + " (or set it in the environment, or as runner.baseUrl in agent.json)"
		}
		if err != nil {
			return err
		}
		if u != "" {
			flags.baseURL, flags.baseURLSource = u, "user config base_urls."+provider(model)
		}
	}
	return nil
}

// provider is the provider of a model spec.
func provider(model string) string {
	p, _ := modelspec.Parse(model)
	return p
}

// providerHosts are the hosts of the providers' own APIs.
var providerHosts = map[string]string{"anthropic": "api.anthropic.com", "openai": "api.openai.com"}

// baseURLFor is the user config's base URL for model's provider, unless
// the provider's environment variable sets one (with the error, the URL
// refused). The user config is a file
// a model whose commands ran unsandboxed could have written, so a base URL
// there alone that is neither a loopback address nor the provider's own
// host is refused (ENDPOINT_UNCONFIRMED): the key and the transcript go
// elsewhere only when the user spells the endpoint on the command line,
// in the environment or in agent.json.
func (uc *userConfig) baseURLFor(model string) (string, error) {
	p := provider(model)
	env, ok := baseURLEnv[p]
	if !ok || os.Getenv(env) != "" {
		return "", nil
	}
	if err := uc.need("base_urls." + p); err != nil {
		return "", err
	}
	u := uc.BaseURLs[p]
	if u == "" || confirmedEndpoint(p, u) {
		return u, nil
	}
	e := agenterr.New(agenterr.CodeEndpointUnconfirmed, agenterr.LayerConfiguration, false,
		"the user config %s sets base_urls.%s to %s, which is neither a loopback address nor %s: a model whose commands ran unsandboxed could have written that file, so capstan does not send the key and the transcript there on its word alone",
		uc.path, p, u, providerHosts[p])
	e.Hint = fmt.Sprintf("if it is yours, confirm it with --base-url %s, or %s=%s in the environment, or runner.baseUrl in agent.json", shellQuote(u), env, shellQuote(u))
	return u, e
}

// confirmedEndpoint reports whether base URL u of provider p needs no
// confirmation: a loopback address, or the provider's own host.
func confirmedEndpoint(p, u string) bool {
	parsed, err := url.Parse(u)
	if err != nil {
		return false
	}
	host := parsed.Hostname()
	if host == "localhost" || strings.EqualFold(host, providerHosts[p]) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// printUserConfigWarnings prints the user config's warnings (unknown
// keys, bad values the command did not need), one line each.
func printUserConfigWarnings(w io.Writer, uc *userConfig) {
	for _, line := range uc.Warnings() {
		fmt.Fprintf(w, "capstan: warning: user config %s\n", line)
	}
}

// describeUserConfig is one line for `capstan doctor`, and the user
// config's warnings.
func describeUserConfig() (string, []string, error) {
	uc, err := loadUserConfig()
	if err != nil {
		return "", nil, err
	}
	if _, statErr := os.Stat(uc.path); statErr != nil {
		return fmt.Sprintf("none at %s (optional)", uc.path), nil, nil
	}
	parts := []string{uc.path}
	if uc.DefaultModel != "" {
		parts = append(parts, "default_model "+uc.DefaultModel)
	}
	for _, p := range slices.Sorted(maps.Keys(uc.BaseURLs)) {
		parts = append(parts, "base_urls."+p)
	}
	if len(uc.Pricing) > 0 {
		parts = append(parts, fmt.Sprintf("pricing for %d model(s)", len(uc.Pricing)))
	}
	return strings.Join(parts, ", "), uc.Warnings(), nil
}
