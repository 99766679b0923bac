package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/llm"
)

// userConfig is the user's own defaults, from
// $XDG_CONFIG_HOME/capstan/config.yaml (~/.config/capstan/config.yaml when
// XDG_CONFIG_HOME is unset):
//
//	default_model: anthropic:claude-sonnet-4-5
//	base_urls:
//	  openai: http://localhost:11434/v1
//
// Precedence, first wins: the command-line flag, the environment
// (CAPSTAN_MODEL; OPENAI_BASE_URL, ANTHROPIC_BASE_URL), the agent's
// agent.json (runner.model, runner.baseUrl), this file.
type userConfig struct {
	// DefaultModel is the model of an agent whose agent.json names none,
	// and of `skills run` without --model.
	DefaultModel string `yaml:"default_model"`
	// BaseURLs are API base URLs per provider (anthropic, openai).
	BaseURLs map[string]string `yaml:"base_urls"`

	path string
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

// loadUserConfig reads the user config; a missing file is an empty config,
// a malformed one a configuration error naming the file and line.
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
	if err := yaml.UnmarshalWithOptions(data, uc, yaml.Strict()); err != nil {
		e := agenterr.New(agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, "user config %s: %s", path, yaml.FormatError(err, false, true))
		e.Hint = "known keys: default_model, base_urls (see docs/cli.md#user-config)"
		return nil, e
	}
	if uc.DefaultModel != "" {
		if provider, _ := llm.ParseSpec(uc.DefaultModel); !knownProvider(provider) {
			e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"user config %s: default_model %q: unknown provider %q", path, uc.DefaultModel, provider)
			e.Hint = "write provider:model with one of: " + strings.Join(llm.Providers(), ", ")
			return nil, e
		}
	}
	for provider, u := range uc.BaseURLs {
		if _, ok := baseURLEnv[provider]; !ok {
			return nil, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"user config %s: base_urls.%s: only %s have a base URL", path, provider, strings.Join(sortedKeys(baseURLEnv), " and "))
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"user config %s: base_urls.%s: %q is not an http(s) URL", path, provider, u)
		}
	}
	return uc, nil
}

func knownProvider(p string) bool {
	for _, known := range llm.Providers() {
		if known == p {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// applyUserDefaults fills what the flags, the environment and agent.json
// left open: the model (flag > CAPSTAN_MODEL > runner.model > default_model)
// and the base URL (flag > <PROVIDER>_BASE_URL > runner.baseUrl > base_urls).
func applyUserDefaults(flags *runFlags, def *config.Agent) error {
	if flags.model == "" {
		flags.model = os.Getenv("CAPSTAN_MODEL")
	}
	runner := def.Definition().Runner
	uc, err := loadUserConfig()
	if err != nil {
		return err
	}
	if flags.model == "" && runner.Model == "" {
		flags.model = uc.DefaultModel
	}
	model := flags.model
	if model == "" {
		model = runner.Model
	}
	if flags.baseURL == "" && runner.BaseURL == "" {
		flags.baseURL = uc.baseURLFor(model)
	}
	return nil
}

// baseURLFor is the user config's base URL for model's provider, unless
// the provider's environment variable sets one.
func (uc *userConfig) baseURLFor(model string) string {
	provider, _ := llm.ParseSpec(model)
	if env, ok := baseURLEnv[provider]; !ok || os.Getenv(env) != "" {
		return ""
	}
	return uc.BaseURLs[provider]
}

// describeUserConfig is one line for `capstan doctor`.
func describeUserConfig() (string, error) {
	uc, err := loadUserConfig()
	if err != nil {
		return "", err
	}
	if _, statErr := os.Stat(uc.path); statErr != nil {
		return fmt.Sprintf("none at %s (optional)", uc.path), nil
	}
	parts := []string{uc.path}
	if uc.DefaultModel != "" {
		parts = append(parts, "default_model "+uc.DefaultModel)
	}
	for _, p := range sortedKeys(uc.BaseURLs) {
		parts = append(parts, "base_urls."+p)
	}
	return strings.Join(parts, ", "), nil
}
