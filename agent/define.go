package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/verify"
)

// Prompts are an agent's prompt texts as Go values. Each is a template
// like a prompt file of an agent folder — YAML frontmatter, {uv-name}
// variables in step and system prompts, Handlebars {{param}} in retry
// prompts — and is served to the run at the path where the folder would
// hold it, so the prompt resolver, validation and the journal treat both
// alike.
type Prompts struct {
	// System is the system prompt, at runner.systemPromptPath (which
	// defaults to "<prompts base>/system.md" when System is set).
	System string
	// Steps are step prompts by step id, each at the C3L file its step's
	// c2, c3, edition and adaptation name.
	Steps map[string]string
	// Retries are the retry prompts of failure patterns by step and
	// pattern, each at the C3L file of the step with the pattern's edition
	// and adaptation.
	Retries map[RetryPrompt]string
}

// RetryPrompt keys Prompts.Retries: the retry prompt sent in step Step
// when a validator fails with failure pattern Pattern (a key of the
// registry's completionPatterns, or a built-in pattern).
type RetryPrompt struct {
	Step    string
	Pattern string
}

// Define is the Go-values way to fill a Config (Load is the agent-folder
// way): it validates cfg.Definition and cfg.Registry — agent.json and
// steps_registry.json as Go values — with cfg.Prompts and cfg.Files as
// the agent's files, by the same code that validates a folder and builds
// the agent, and returns cfg with Agent set and Definition, Registry,
// Prompts and Files cleared (they are in Agent now). New calls it when
// Agent is nil. Problems come back all at once: an *agentdir.ValidationError, or a
// CONFIG_INVALID error per Prompts key that names no step or pattern.
//
// The definition has no folder: relative paths (prompt base, schemas,
// scripts, skills) name files of Files and Prompts, and nothing is read
// from the disk.
func Define(cfg Config) (Config, error) {
	if cfg.Agent != nil {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"Config.Agent and Config.Definition are both set")
		e.Hint = "build the agent from a folder (Load) or from Go values (Definition, Registry, Prompts), not both"
		return cfg, e
	}
	if cfg.Definition == nil || cfg.Registry == nil {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"an agent built from Go values needs Config.Definition and Config.Registry")
		e.Hint = "set both (agent.json and steps_registry.json as Go values), or load an agent folder with agent.Load"
		return cfg, e
	}
	def, reg := *cfg.Definition, *cfg.Registry
	goDefaults(&reg, cfg.Prompts)
	files, err := readFiles(cfg.Files)
	if err != nil {
		return cfg, err
	}
	for _, name := range []string{agentdir.AgentFile, path.Clean(registryFile(&def))} {
		if _, ok := files[name]; ok {
			e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"Config.Files holds %s, but an agent built from Go values is defined by Config.Definition and Config.Registry", name)
			e.Hint = "leave agent.json and the steps registry out of Files, or load the agent folder with agent.Load"
			return cfg, e
		}
	}
	placed, err := cfg.Prompts.place(&def, &reg, files)
	if err != nil {
		return cfg, err
	}
	snap, err := agentdir.SnapshotFromFiles("", files)
	if err != nil {
		return cfg, err
	}
	a, err := agentdir.NewAgentFS(snap, "", &def, &reg, ValidateOptionsFor(cfg))
	if ve, ok := errors.AsType[*agentdir.ValidationError](err); ok {
		return cfg, ve.Relocated(goLocator(registryFile(&def), placed),
			"fix the Go values listed above; agent.Define (and agent.New) report every problem at once")
	}
	if err != nil {
		return cfg, err
	}
	cfg.Agent = a
	cfg.Definition, cfg.Registry, cfg.Prompts, cfg.Files = nil, nil, Prompts{}, nil // now in Agent
	return cfg, nil
}

// readFiles copies the regular files of fsys (nil: none).
func readFiles(fsys fs.FS) (map[string][]byte, error) {
	files := map[string][]byte{}
	if fsys == nil {
		return files, nil
	}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if len(files) >= agentdir.MaxFiles {
			return fmt.Errorf("more than %d files", agentdir.MaxFiles)
		}
		b, err := fs.ReadFile(fsys, p)
		files[p] = b
		return err
	})
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false, "read Config.Files")
	}
	return files, nil
}

// place puts the prompts into files at their paths and returns, for each
// path it filled, the Go field of its prompt ("Config.Prompts.System");
// def's systemPromptPath is set when System needs it. Every key that names
// no step or pattern is reported.
func (p Prompts) place(def *agentdir.Definition, reg *agentdir.Registry, files map[string][]byte) (map[string]string, error) {
	base := def.Runner.Prompts.Base
	if base == "" {
		base = agentdir.DefaultPromptsBase
	}
	c1 := reg.C1
	if c1 == "" {
		c1 = agentdir.DefaultC1
	}
	var errs []error
	bad := func(what, key, hint string) {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false, "Config.Prompts.%s: %s", what, key)
		e.Hint = hint
		errs = append(errs, e)
	}
	placed := map[string]string{}
	put := func(file, text, field string) {
		if p := path.Join(base, file); fs.ValidPath(p) {
			files[p] = []byte(text)
			placed[p] = field
		} // else: validation reports the prompts base outside the agent folder
	}
	if p.System != "" {
		if def.Runner.SystemPromptPath == "" {
			def.Runner.SystemPromptPath = path.Join(base, "system.md")
		}
		if sp := path.Clean(def.Runner.SystemPromptPath); fs.ValidPath(sp) {
			files[sp] = []byte(p.System)
			placed[sp] = "Config.Prompts.System"
		} // else: validation reports the path outside the agent folder
	}
	ids := sortedIDs(reg.Steps)
	knownSteps := "the registry's steps: " + strings.Join(ids, ", ")
	for _, id := range sortedIDs(p.Steps) {
		st, ok := reg.Steps[id]
		if !ok {
			bad("Steps", "no step "+strconv.Quote(id), "key step prompts by step id; "+knownSteps)
			continue
		}
		file, err := agentdir.C3LFile(c1, agentdir.PromptRef{C2: st.C2, C3: st.C3, Edition: st.Edition, Adaptation: st.Adaptation})
		if err != nil {
			bad("Steps", "step "+strconv.Quote(id)+" names no prompt file: "+err.Error(),
				"set the step's C2 and C3 (its prompt is <prompts base>/<c1>/<c2>/<c3>/f_<edition>.md)")
			continue
		}
		put(file, p.Steps[id], fmt.Sprintf("Config.Prompts.Steps[%q]", id))
	}
	keys := make([]RetryPrompt, 0, len(p.Retries))
	for k := range p.Retries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b RetryPrompt) int {
		return strings.Compare(a.Step+"\x00"+a.Pattern, b.Step+"\x00"+b.Pattern)
	})
	for _, k := range keys {
		st, ok := reg.Steps[k.Step]
		if !ok {
			bad("Retries", "no step "+strconv.Quote(k.Step), "key retry prompts by step id and pattern; "+knownSteps)
			continue
		}
		pat, ok := verify.LookupPattern(reg.CompletionPatterns, k.Pattern)
		if !ok {
			bad("Retries", "no failure pattern "+strconv.Quote(k.Pattern), "name a key of the registry's completionPatterns or a built-in pattern: "+
				strings.Join(builtinPatternNames(), ", "))
			continue
		}
		edition := pat.Edition
		if edition == "" {
			edition = "failed"
		}
		file, err := agentdir.C3LFile(c1, agentdir.PromptRef{C2: st.C2, C3: st.C3, Edition: edition, Adaptation: pat.Adaptation})
		if err != nil {
			bad("Retries", "step "+strconv.Quote(k.Step)+" names no prompt file: "+err.Error(), "set the step's C2 and C3")
			continue
		}
		put(file, p.Retries[k], fmt.Sprintf("Config.Prompts.Retries[{Step: %q, Pattern: %q}]", k.Step, k.Pattern))
	}
	return placed, errors.Join(errs...)
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
