package agentdir

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

func (c *checker) agent() {
	c.runnerModel()
	c.toolPatterns()
	c.verificationSettings()
	c.agentFiles()
	c.completion("/runner/completion", c.def.Runner.Completion)
	c.integrations()
	c.mcpServers()
	c.claudeCodeInertFields()
	c.compactionSettings()
	c.budgetsAndAgentID()
}

// runnerModel checks runner.model and runner.baseUrl.
func (c *checker) runnerModel() {
	r := &c.def.Runner
	a := c.agentSrc
	if r.Model != "" {
		c.model(a, "AC", "/runner/model", r.Model)
	}
	if r.BaseURL != "" {
		// Not quoted: what is not a URL may be a key given in the wrong
		// place.
		if u, err := url.Parse(r.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.report(a, "AC-BASE-URL", SeverityError, "/runner/baseUrl",
				"use an absolute http(s) URL such as \"http://localhost:11434/v1\", and give a key by environment, not in the URL",
				"baseUrl is not an absolute http(s) URL")
		}
	}
}

// toolPatterns checks the patterns of runner.boundaries' allowed and
// disallowed tools.
func (c *checker) toolPatterns() {
	r := &c.def.Runner
	a := c.agentSrc
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"allowedTools", r.Boundaries.AllowedTools}, {"disallowedTools", r.Boundaries.DisallowedTools}} {
		for i, p := range list.patterns {
			if err := tooldecl.ValidatePattern(p); err != nil {
				c.report(a, "AC-TOOL-PATTERN", SeverityError, JoinPointer("runner", "boundaries", list.key, fmt.Sprint(i)),
					"write a tool name (\"Read\"), a glob (\"mcp__github__*\") or a name with a rule (\"Bash(git log:*)\")",
					"%v", err)
			}
		}
	}
}

// verificationSettings checks runner.verification: protected and hidden
// globs, and a testChanges policy that needs hidden tests.
func (c *checker) verificationSettings() {
	r := &c.def.Runner
	a := c.agentSrc
	c.protectGlobs(a, "AC-PROTECT-GLOB", "/runner/verification/protect", r.Verification.Protect)
	c.hiddenGlobs(a, r.Verification.Hidden)
	if r.Verification.TestChanges == TestChangesHiddenTests && len(r.Verification.Hidden) == 0 {
		c.report(a, "AC-TESTCHANGES-HIDDEN", SeverityError, "/runner/verification/testChanges",
			"add hidden tests (runner.verification.hidden) that decide whether a test change is right, or use \"human\" to have a person decide",
			"testChanges %q accepts a test change only when the hidden tests pass, and the agent has none", r.Verification.TestChanges)
	}
}

// agentFiles checks that the files and folders the runner names exist:
// the system prompt, the prompt folders and the skills.
func (c *checker) agentFiles() {
	r := &c.def.Runner
	a := c.agentSrc
	if r.SystemPromptPath != "" {
		c.file(a, "AC", "/runner/systemPromptPath", r.SystemPromptPath, false, "AC-SYSTEM-PROMPT-MISSING",
			"create the file or fix runner.systemPromptPath")
	}
	base := r.Prompts.Base
	if base == "" {
		base = "prompts"
	}
	if c.agentSrc.has("/runner/prompts/base") || !c.reg.commandsOnly() {
		c.file(a, "AC", "/runner/prompts/base", base, true, "AC-PROMPTS-DIR-MISSING",
			"create the prompts folder (prompts/<c1>/<c2>/<c3>/f_<edition>.md) or fix runner.prompts.base")
	}
	if r.Prompts.FallbackDir != "" {
		c.file(a, "AC", "/runner/prompts/fallbackDir", r.Prompts.FallbackDir, true, "AC-PROMPTS-DIR-MISSING",
			"create the folder or remove runner.prompts.fallbackDir")
	}
	for i, s := range r.Skills {
		ptr := JoinPointer("runner", "skills", fmt.Sprint(i))
		if c.file(a, "AC", ptr, s, true, "AC-SKILL-MISSING", "create the skill folder with a SKILL.md, or remove it from runner.skills") &&
			(c.dir != "" || c.def.FS() != nil) && !holdsSkill(c.def.FS(), c.dir, s) {
			c.report(a, "AC-SKILL-MISSING", SeverityError, ptr, "add SKILL.md (agentskills.io format) to the skill folder, or list a folder of skill folders",
				"%s has no SKILL.md, neither itself nor in a skill folder below it", s)
		}
	}
}

// mcpServers checks each MCP server's transport, and an idempotent mark
// the claude-code backend cannot honour.
func (c *checker) mcpServers() {
	r := &c.def.Runner
	a := c.agentSrc
	for _, name := range sortedKeys(r.MCPServers) {
		s := r.MCPServers[name]
		if (s.Command == "") == (s.URL == "") {
			c.report(a, "AC-MCP-TRANSPORT", SeverityError, JoinPointer("runner", "mcpServers", name),
				"set command (stdio server) or url (HTTP server), not both",
				"MCP server %q needs exactly one of command and url", name)
		}
		if provider, _, _ := strings.Cut(r.Model, ":"); provider == "claude-code" && s.Idempotent {
			c.report(a, "AC-IDEMPOTENT-IGNORED", SeverityWarning, JoinPointer("runner", "mcpServers", name, "idempotent"),
				"remove it, or run an API provider (--model anthropic:… / openai:…) where capstan runs the tool loop",
				"idempotent does not apply to the claude-code backend: the Claude Code CLI runs the MCP calls itself, outside capstan's tool-effect ledger")
		}
	}
}

// claudeCodeInertFields warns of runner fields that do not apply to the
// claude-code backend, which runs its own tool loop.
func (c *checker) claudeCodeInertFields() {
	r := &c.def.Runner
	a := c.agentSrc
	if provider, _, _ := strings.Cut(r.Model, ":"); provider != "claude-code" {
		return
	}
	if r.ContextWindow > 0 || r.Compaction != nil {
		ptr := "/runner/compaction"
		if r.Compaction == nil {
			ptr = "/runner/contextWindow"
		}
		c.report(a, "AC-COMPACTION-IGNORED", SeverityWarning, ptr,
			"remove it; the Claude Code CLI manages its own context (see CLAUDE_CODE_AUTO_COMPACT_WINDOW in its documentation)",
			"runner.contextWindow and runner.compaction do not apply to the claude-code backend, which runs its own tool loop and compacts by itself")
	}
	if r.Requests != (Requests{}) {
		c.report(a, "AC-REQUESTS-IGNORED", SeverityWarning, "/runner/requests",
			"remove it, or run an API provider (--model anthropic:… / openai:…) where it applies",
			"runner.requests (request timeouts, retry-after ceiling) does not apply to the claude-code backend: the Claude Code CLI makes its own requests")
	}
	if r.Boundaries.MaxToolCallsPerTurn > 0 {
		c.report(a, "AC-TOOL-CALLS-IGNORED", SeverityWarning, "/runner/boundaries/maxToolCallsPerTurn",
			"remove it, or run an API provider (--model anthropic:… / openai:…) where capstan runs the tools",
			"runner.boundaries.maxToolCallsPerTurn does not apply to the claude-code backend: the Claude Code CLI runs the tool calls itself")
	}
}

// compactionSettings checks runner.compaction's summary model and that
// its target is below its threshold.
func (c *checker) compactionSettings() {
	r := &c.def.Runner
	a := c.agentSrc
	if cp := r.Compaction; cp != nil {
		if cp.SummaryModel != "" {
			c.model(a, "AC", "/runner/compaction/summaryModel", cp.SummaryModel)
		}
		threshold, target := cp.Threshold, cp.Target
		if threshold == 0 {
			threshold = 0.75
		}
		if target != 0 && target >= threshold {
			c.report(a, "AC-COMPACTION-TARGET", SeverityError, "/runner/compaction/target",
				fmt.Sprintf("use a target below the threshold (%g), e.g. %g", threshold, threshold/2),
				"compaction target %g is not below the threshold %g: compaction would not shrink the request", target, threshold)
		}
	}
}

// budgetsAndAgentID warns of a maxIterations above the hard limit and of
// a registry agentId that differs from agent.json's name.
func (c *checker) budgetsAndAgentID() {
	r := &c.def.Runner
	a := c.agentSrc
	if n := r.Budgets.MaxIterations; n > hardLimit {
		c.report(a, "AC-BUDGET-HARD-LIMIT", SeverityWarning, "/runner/budgets/maxIterations",
			fmt.Sprintf("use at most %d", hardLimit),
			"maxIterations %d is never reached: a run that has not completed by iteration %d stops there with emergency_stop (HARD_LIMIT), not max_iterations", n, hardLimit)
	}
	// Without a name (AC-SCHEMA-REQUIRED) there is nothing to compare.
	if id := c.reg.AgentID; id != "" && c.def.Name != "" && id != c.def.Name {
		c.report(c.regSrc, "SR-AGENT-ID", SeverityWarning, "/agentId",
			fmt.Sprintf("set agentId to %q (agent.json name)", c.def.Name),
			"agentId %q differs from agent.json name %q", id, c.def.Name)
	}
}

// model checks a provider:model spec.
func (c *checker) model(src *source, prefix, ptr, spec string) {
	provider, model, hasModel := strings.Cut(spec, ":")
	if !providerRE().MatchString(provider) || (hasModel && strings.TrimSpace(model) == "") || strings.ContainsAny(spec, " \t\r\n") {
		c.report(src, prefix+"-MODEL-SYNTAX", SeverityError, ptr,
			"write provider:model, e.g. \"anthropic:claude-sonnet-4-5\", \"openai:gpt-4.1\", \"script:script.yaml\"",
			"model %q is not provider:model", spec)
		return
	}
	if c.opts.Providers != nil && !slices.Contains(c.opts.Providers, provider) {
		known := slices.Sorted(slices.Values(c.opts.Providers))
		c.report(src, prefix+"-MODEL-PROVIDER", SeverityError, ptr,
			"use one of: "+strings.Join(known, ", "),
			"unknown model provider %q", provider)
		return
	}
	if provider == "script" {
		file := model
		if file == "" {
			file = "script.yaml"
		}
		c.file(src, prefix, ptr, file, false, prefix+"-MODEL-SCRIPT", "create the script file (see docs/configuration.md) or fix the model")
	}
}

// file checks that rel is inside the agent folder and exists (as a
// directory when dir is set). It reports prefix-PATH-OUTSIDE or missing
// and returns whether the path is usable.
func (c *checker) file(src *source, prefix, ptr, rel string, dir bool, missingCode, hint string) bool {
	if msg := LexicalInside(rel); msg != "" {
		c.report(src, prefix+"-PATH-OUTSIDE", SeverityError, ptr,
			"use a path relative to the agent folder that stays inside it", "path %q %s", rel, msg)
		return false
	}
	var fi fs.FileInfo
	var err error
	if fsys := c.def.FS(); fsys != nil {
		// A pinned snapshot holds only files inside the agent folder.
		fi, err = fs.Stat(fsys, path.Clean(filepath.ToSlash(rel)))
	} else {
		if c.dir == "" {
			return true
		}
		if msg := insideDir(c.dir, rel); msg != "" {
			c.report(src, prefix+"-PATH-OUTSIDE", SeverityError, ptr,
				"use a path relative to the agent folder that stays inside it", "path %q %s", rel, msg)
			return false
		}
		fi, err = os.Stat(filepath.Join(c.dir, filepath.FromSlash(rel)))
	}
	switch {
	case err != nil:
		c.report(src, missingCode, SeverityError, ptr, hint, "%s does not exist", rel)
		return false
	case dir && !fi.IsDir():
		c.report(src, missingCode, SeverityError, ptr, hint, "%s is not a directory", rel)
		return false
	case !dir && !fi.Mode().IsRegular():
		c.report(src, missingCode, SeverityError, ptr, hint, "%s is not a regular file", rel)
		return false
	}
	return true
}

// LexicalInside says why rel, a path as written in the configuration, is
// not a relative path that stays inside its folder ("is absolute; it must
// be relative", "leaves its folder (\"..\")", …), or "" when it is. It
// looks at the text only, not at the file system (no symbolic links).
func LexicalInside(rel string) string {
	if rel == "" {
		return "is empty"
	}
	if strings.ContainsRune(rel, 0) {
		return "contains a NUL byte"
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, `\`) || filepath.VolumeName(rel) != "" {
		return "is absolute; it must be relative"
	}
	clean := filepath.Clean(filepath.FromSlash(rel))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "leaves its folder (\"..\")"
	}
	return ""
}

// completion checks what runner.completion's builder does not read: fields
// the type ignores. The rules of the fields it reads (a keyword for type
// keyword, a composite's mode and conditions, a custom handler, the
// validators existing, …) are checked by the builder itself
// (verdict.CompletionFromConfig), which validate runs through the agent layer's
// checks.
func (c *checker) completion(ptr string, comp Completion) {
	a := c.agentSrc
	if comp.Type == "iterationBudget" && comp.MaxIterations > hardLimit {
		c.report(a, "AC-BUDGET-HARD-LIMIT", SeverityWarning, ptr+"/maxIterations",
			fmt.Sprintf("use at most %d", hardLimit),
			"an iteration budget of %d is never reached: the loop stops at its hard limit of %d iterations first, ending the run with emergency_stop (HARD_LIMIT), not completed", comp.MaxIterations, hardLimit)
	}
	for i, sub := range comp.Conditions {
		c.completion(fmt.Sprintf("%s/conditions/%d", ptr, i), sub)
	}
	// A field the type does not read would be silently ignored: an error,
	// so that every accepted field acts.
	ignored := func(set bool, field, usedBy string) {
		if set {
			c.report(a, "AC-IGNORED-FIELD", SeverityError, ptr+"/"+field,
				"remove it, or change type to "+usedBy,
				"%s has no effect with completion type %q (only %s uses it)", field, comp.Type, usedBy)
		}
	}
	if comp.Type != "" {
		ignored(comp.Keyword != "" && comp.Type != "keyword" && comp.Type != "structured", "keyword", "keyword or structured")
		ignored(comp.Mode != "" && comp.Type != "composite", "mode", "composite")
		ignored(len(comp.Conditions) > 0 && comp.Type != "composite", "conditions", "composite")
		ignored(comp.Handler != "" && comp.Type != "custom", "handler", "custom")
		ignored(comp.MaxIterations != 0 && comp.Type != "iterationBudget", "maxIterations", "iterationBudget")
		ignored(len(comp.Options) > 0 && comp.Type != "structured" && comp.Type != "externalState" && comp.Type != "custom" && comp.Type != "signal",
			"options", "structured, externalState, signal or custom")
	}
	if comp.Name != "" && ptr == "/runner/completion" {
		c.report(a, "AC-IGNORED-FIELD", SeverityError, ptr+"/name", "remove it; name labels a condition inside a composite",
			"name has no effect on the top-level completion")
	}
}

// Flag returns the CLI flag of the parameter called name: Cli when set,
// otherwise "--" + name with underscores turned into dashes and camelCase
// into kebab-case ("iterateMax" → "--iterate-max").
func (p Parameter) Flag(name string) string {
	if p.Cli != "" {
		return p.Cli
	}
	return "--" + kebab(name)
}

func (c *checker) parameters() {
	a := c.agentSrc
	reserved := append(DefaultReservedFlags(), c.opts.ReservedFlags...)
	flags := map[string]string{}
	for _, name := range sortedKeys(c.def.Parameters) {
		p := c.def.Parameters[name]
		ptr := JoinPointer("parameters", name)
		if !paramNameRE().MatchString(name) {
			c.reportKey(a, "PA-NAME", SeverityError, ptr,
				"use letters, digits, '_' and '-', starting with a letter (e.g. \"issue_number\" or \"issueNumber\")",
				"parameter name %q is not allowed", name)
		}
		if p.Cli != "" && !cliFlagRE().MatchString(p.Cli) {
			c.report(a, "PA-CLI-SYNTAX", SeverityError, ptr+"/cli",
				"write \"--\" then lowercase letters, digits and dashes, e.g. \"--issue\"",
				"cli flag %q is not a valid long flag", p.Cli)
		}
		flag := p.Flag(name)
		if other, dup := flags[flag]; dup {
			c.report(a, "PA-CLI-DUPLICATE", SeverityError, ptr,
				"give one of them another cli flag",
				"parameters %q and %q both use the flag %s", other, name, flag)
		} else {
			flags[flag] = name
		}
		if slices.Contains(reserved, flag) {
			c.report(a, "PA-CLI-RESERVED", SeverityError, ptr,
				"rename the parameter or set another cli flag; "+strings.Join(reserved, ", ")+" belong to capstan run",
				"flag %s of parameter %q clashes with capstan run's own flag", flag, name)
		}
		c.paramValidation(ptr, p)
		if len(p.Default) > 0 && string(p.Default) != "null" {
			if p.Required {
				c.report(a, "PA-REQUIRED-DEFAULT", SeverityWarning, ptr+"/default",
					"remove the default, or set required to false",
					"parameter %q is required, so its default is never used", name)
			}
			// A missing or unknown type is the schema's error; a default
			// is checked against a known one only.
			if slices.Contains([]string{"string", "number", "boolean"}, p.Type) {
				if v, msg := defaultString(p); msg != "" {
					c.report(a, "PA-DEFAULT-TYPE", SeverityError, ptr+"/default",
						fmt.Sprintf("write a %s value", p.Type), "default of %q %s", name, msg)
				} else if msg := checkParamValue(p, v); msg != "" {
					c.report(a, "PA-DEFAULT-INVALID", SeverityError, ptr+"/default",
						"change the default or the validation", "default of %q: %s", name, msg)
				}
			}
		}
	}
}

func (c *checker) paramValidation(ptr string, p Parameter) {
	v := p.Validation
	if v == nil {
		return
	}
	a := c.agentSrc
	bad := func(field, hint, format string, args ...any) {
		c.report(a, "PA-VALIDATION", SeverityError, ptr+"/validation/"+field, hint, format, args...)
	}
	if (v.Min != nil || v.Max != nil) && p.Type != "number" {
		field := "min"
		if v.Min == nil {
			field = "max"
		}
		bad(field, "use min/max with type number only", "%s applies to number parameters, not %s", field, p.Type)
	}
	if v.Min != nil && v.Max != nil && *v.Min > *v.Max {
		bad("min", "swap them", "min %v is greater than max %v", *v.Min, *v.Max)
	}
	if v.Pattern != "" {
		if p.Type != "string" {
			bad("pattern", "use pattern with type string only", "pattern applies to string parameters, not %s", p.Type)
		} else if _, err := regexp.Compile(v.Pattern); err != nil {
			bad("pattern", "write a Go (RE2) regular expression", "pattern %q does not compile: %v", v.Pattern, err)
		}
	}
	if len(v.Enum) > 0 {
		switch p.Type {
		case "boolean":
			bad("enum", "remove enum; a boolean is already true or false", "enum does not apply to boolean parameters")
		case "number":
			for i, e := range v.Enum {
				if !isNumber(e) {
					bad(fmt.Sprintf("enum/%d", i), "write numbers as strings, e.g. \"3\"", "enum value %q is not a number", e)
				}
			}
		}
	}
}

// protectsAnything reports whether the agent or any step protects files.
func (c *checker) protectsAnything() bool {
	if len(c.def.Runner.Verification.Protect) > 0 {
		return true
	}
	for _, st := range c.reg.Steps {
		if len(st.Protect) > 0 {
			return true
		}
	}
	return false
}

// protectGlobs checks protect globs: valid, relative, "/"-separated.
func (c *checker) protectGlobs(src *source, code, ptr string, globs []string) {
	for i, g := range globs {
		if !doublestar.ValidatePattern(g) || strings.HasPrefix(g, "/") || strings.Contains(g, "\\") {
			c.report(src, code, SeverityError, ptr+"/"+fmt.Sprint(i),
				"write a glob relative to the work dir with / separators, e.g. \"**/*_test.go\" or \"tests/**\"",
				"protect glob %q is not a valid relative glob", g)
		}
	}
}

// hiddenGlobs checks runner.verification.hidden: each glob valid and
// relative, matching at least one file of the agent folder, and a test
// validator to run them with.
func (c *checker) hiddenGlobs(src *source, globs []string) {
	if len(globs) == 0 {
		return
	}
	fsys := c.def.FS()
	if fsys == nil && c.dir != "" {
		fsys = os.DirFS(c.dir)
	}
	for i, g := range globs {
		ptr := "/runner/verification/hidden/" + fmt.Sprint(i)
		if !doublestar.ValidatePattern(g) || strings.HasPrefix(g, "/") || strings.Contains(g, "\\") || LexicalInside(g) != "" {
			c.report(src, "AC-HIDDEN-GLOB", SeverityError, ptr,
				"write a glob relative to the agent folder with / separators, e.g. \"hidden/**\" or \"calc/hidden_test.go\"",
				"hidden glob %q is not a valid relative glob", g)
			continue
		}
		if fsys == nil {
			continue
		}
		if m, _ := doublestar.Glob(fsys, g, doublestar.WithFilesOnly()); len(m) == 0 {
			c.report(src, "AC-HIDDEN-MISSING", SeverityError, ptr,
				"put the hidden test files in the agent folder at the path the glob names (they are placed at the same path in the work dir), or fix the glob",
				"hidden glob %q matches no file of the agent folder", g)
		}
	}
	runsTests, mistyped := false, false
	for name, v := range c.reg.Validators {
		runsTests = runsTests || v.Type == "command" && RunsTests(v.Command)
		mistyped = mistyped || c.schemaCovers(c.regSrc, JoinPointer("validators", name))
	}
	if !runsTests && !mistyped { // a validator of the wrong type or command is its schema error
		c.report(src, "AC-HIDDEN-INERT", SeverityError, "/runner/verification/hidden",
			"add a command validator that runs the tests (e.g. \"command\": \"go test -v ./...\") to a completion condition, or remove hidden",
			"hidden tests are run by the command validators that run tests, and the registry declares none")
	}
}

// holdsSkill reports whether rel, a folder of the agent in dir (or in
// fsys, when the definition was loaded from one), is a skill folder (it has
// a SKILL.md) or a folder of skill folders (one of its sub-folders, at any
// depth, has one), as runner.skills accepts both.
func holdsSkill(fsys fs.FS, dir, rel string) bool {
	if fsys == nil {
		fsys = os.DirFS(dir)
	}
	found := false
	_ = fs.WalkDir(fsys, path.Clean(filepath.ToSlash(rel)), func(p string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return fs.SkipDir
		}
		if !d.IsDir() && d.Name() == "SKILL.md" {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	return found
}
