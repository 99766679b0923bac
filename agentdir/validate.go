package agentdir

import (
	"encoding/json"
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
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/tool"
)

// ValidateOptions tells Validate what the running binary knows. A nil list
// means "not known here": the corresponding check is skipped (documented
// per field), never guessed.
type ValidateOptions struct {
	// Dir is the agent folder for file checks (systemPromptPath, prompts
	// base, skills, schema files, script files). Default: the folder the
	// definition was loaded from; when both are empty file checks are
	// skipped.
	Dir string
	// Providers are the registered model providers (llm.Providers()). When
	// non-nil, runner.model and step models must name one of them.
	Providers []string
	// BuiltinVariables are {uv-x} variables the runtime supplies itself
	// (not parameters); uvVariables may name them without a parameter.
	BuiltinVariables []string
	// ReservedFlags are added to DefaultReservedFlags(): flags of `capstan
	// run` that parameters must not reuse.
	ReservedFlags []string
	// Checks are further checks contributed by the layers above
	// configuration (prompt files exist, retry prompts resolve, schema
	// references resolve). Each returns problems whose File is agent.json or
	// the registry file and whose Pointer locates them; Validate fills in
	// the file name and line:col. dir is the agent folder ("" when file
	// checks are skipped).
	Checks []func(dir string, def *Definition, reg *Registry) []Problem
}

// DefaultReservedFlags returns the flags of `capstan run` that a
// parameter's cli flag must not clash with: every flag the command has (a
// test of cmd/capstan keeps this list equal to its real flag set, and
// docs/configuration.md lists it).
func DefaultReservedFlags() []string {
	return []string{
		"--accept-changed-definition", "--allow-key-in-ancestors", "--base-url", "--connect-timeout", "--continue-every",
		"--first-byte-timeout", "--help", "--json", "--max-iterations", "--max-retry-after", "--model", "--namespace", "--no-sandbox",
		"--quiet", "--repo", "--stream", "--stream-idle-timeout", "--task-queue", "--temporal", "--workdir", "--worker-timeout",
	}
}

var (
	paramNameRE = lazyre.New(`^[a-zA-Z][a-zA-Z0-9_-]*$`)
	// testRunnerRE finds a test runner in a validator command.
	testRunnerRE = lazyre.New(`\b(go test|pytest|unittest|(npm|yarn|pnpm|bun)( run)? test|jest|vitest|mocha|node --test|cargo (test|nextest)|make (test|check)|tox|rspec|(mvn|gradle|\./gradlew) test|dotnet test)\b`)
	cliFlagRE    = lazyre.New(`^--[a-z][a-z0-9-]*$`)
	providerRE   = lazyre.New(`^[a-z][a-z0-9_-]*$`)
)

// Validate checks def and reg against the JSON Schemas and for semantics
// and cross-references, and reports every problem at once (seed 000
// ConfigurationLoader.validate; it has no side effects). def and reg are
// normally Load's results after ApplyDefaults; definitions built in Go are
// validated too, without line:col.
func Validate(def *Definition, reg *Registry, opts ValidateOptions) ValidationResult {
	if def == nil {
		def = &Definition{}
	}
	if reg == nil {
		reg = &Registry{}
	}
	c := &checker{opts: opts, def: def, reg: reg, schemaErr: map[*source][]string{}, synthetic: map[*source]bool{}}
	c.dir = opts.Dir
	c.agentSrc = def.src
	if c.agentSrc == nil {
		c.agentSrc = c.synthesize(AgentFile, def)
	} else if c.dir == "" {
		c.dir = def.src.dir
	}
	regFile := def.Runner.Prompts.Registry
	if regFile == "" {
		regFile = DefaultRegistryFile
	}
	c.regSrc = reg.src
	if c.regSrc == nil {
		c.regSrc = c.synthesize(filepath.ToSlash(filepath.Clean(regFile)), reg)
	}
	c.stepIDs, c.validatorNames = sortedKeys(reg.Steps), sortedKeys(reg.Validators)
	c.stepHint = "use one of the step ids" + known(c.stepIDs)
	c.schema(AgentFile, "AC", c.agentSrc)
	c.schema(DefaultRegistryFile, "SR", c.regSrc)
	c.agent()
	c.climpt()
	c.parameters()
	c.registry()
	for _, check := range opts.Checks {
		for _, p := range check(c.dir, def, reg) {
			if p.File != AgentFile && p.File != c.regSrc.file && p.File != "" {
				// A problem in another file (a bad keyword in a schema
				// file) comes located by the check that read it.
				c.problems = append(c.problems, p)
				continue
			}
			if p.File == AgentFile {
				p.Pointer = c.agentSrc.aliases.actual(p.Pointer)
			} else {
				p.Pointer = c.regSrc.aliases.actual(p.Pointer)
			}
			if (p.Code == agenterr.CodeConfigurationValidation || c.hasCode(p.Code)) && c.reported(p) || p.Code == "SR-ENTRY-STEP" && c.hasCode(p.Code) {
				continue // a builder's error where a rule above already reported one: one cause, one report
			}
			if p.Code == "SR-SCHEMA-UNRESOLVED" && c.errorAt(p.File, p.Pointer+"/file") {
				continue // the schema file is missing or outside its folder: SR-SCHEMA-FILE or SR-PATH-OUTSIDE says so
			}
			src := c.regSrc
			if p.File == AgentFile {
				src = c.agentSrc
			}
			if c.schemaCovers(src, p.Pointer) {
				continue // the value has the wrong type: the schema error says so
			}
			c.add(src, p, false)
		}
	}
	c.demoteUnreachable()
	return NewValidationResult(c.problems...)
}

// hasCode reports whether an error with this code is already reported.
func (c *checker) hasCode(code string) bool {
	for _, q := range c.problems {
		if q.Code == code && q.Severity == SeverityError {
			return true
		}
	}
	return false
}

// errorAt reports whether an error is already reported at pointer of file.
func (c *checker) errorAt(file, pointer string) bool {
	for _, q := range c.problems {
		if q.Severity == SeverityError && q.File == file && q.Pointer == pointer {
			return true
		}
	}
	return false
}

// reported reports whether an error is already reported at p's pointer,
// above it or below it.
func (c *checker) reported(p Problem) bool {
	for _, q := range c.problems {
		if q.Severity != SeverityError || q.File != p.File {
			continue
		}
		if q.Pointer == p.Pointer || p.Pointer != "" && strings.HasPrefix(p.Pointer, q.Pointer+"/") || strings.HasPrefix(q.Pointer, p.Pointer+"/") {
			return true
		}
	}
	return false
}

// checker accumulates problems for one Validate call.
type checker struct {
	opts             ValidateOptions
	dir              string
	def              *Definition
	reg              *Registry
	agentSrc, regSrc *source
	synthetic        map[*source]bool
	schemaErr        map[*source][]string // pointers with schema errors
	problems         []Problem
	stepIDs          []string        // sorted keys of reg.Steps
	stepHint         string          // "use one of the step ids (known: …)"
	validatorNames   []string        // sorted keys of reg.Validators
	reach            map[string]bool // Reachable(reg), see reachableSteps
	reachDone        bool
	routed           int8              // reg.RoutedByIntent(): 0 not yet known, 1 yes, -1 no; see routedByIntent
	otherEntries     map[string]string // step → verdict type whose entry reaches it, see unreachableWhy
}

// synthesize makes a source for a definition built in Go. Go's zero
// values mean "unset", so empty strings and zero numbers are dropped before
// the schema sees them (a gateway step's c2 "" is absent, not a bad path
// segment; a missing name is reported as missing).
func (c *checker) synthesize(file string, v any) *source {
	raw, err := json.Marshal(v)
	var tree any
	if err == nil {
		err = json.Unmarshal(raw, &tree)
	}
	if err == nil {
		raw, err = json.Marshal(pruneZero(tree))
	}
	if err != nil {
		raw = []byte("{}")
	}
	s := newSource(file, raw)
	c.synthetic[s] = true
	return s
}

// report records a problem unless a schema error already covers its
// pointer (a value of the wrong type decodes as zero and would otherwise be
// reported twice).
func (c *checker) report(src *source, code string, sev Severity, ptr string, hint, format string, args ...any) {
	ptr = src.aliases.actual(ptr)
	if c.schemaCovers(src, ptr) {
		return
	}
	c.add(src, Problem{Code: code, Severity: sev, Pointer: ptr, Hint: hint, Message: fmt.Sprintf(format, args...)}, false)
}

// schemaCovers reports whether a schema error of src is at ptr or above
// it.
func (c *checker) schemaCovers(src *source, ptr string) bool {
	for _, s := range c.schemaErr[src] {
		if ptr == s || strings.HasPrefix(ptr, s+"/") {
			return true
		}
	}
	return false
}

func (c *checker) add(src *source, p Problem, keyPos bool) {
	p.Pointer = src.aliases.actual(p.Pointer)
	p.File = src.file
	if !c.synthetic[src] {
		p.Line, p.Column = src.locate(p.Pointer, keyPos)
	}
	c.problems = append(c.problems, p)
}

// reportKey is report for problems about a member name (a map key).
func (c *checker) reportKey(src *source, code string, sev Severity, ptr string, hint, format string, args ...any) {
	c.add(src, Problem{Code: code, Severity: sev, Pointer: ptr, Hint: hint, Message: fmt.Sprintf(format, args...)}, true)
}

func (c *checker) schema(kindName, prefix string, src *source) {
	for _, sp := range checkSchema(kindName, src) {
		sev := SeverityError
		if sp.code == "UNKNOWN-KEY" {
			sev = SeverityWarning
		} else {
			c.schemaErr[src] = append(c.schemaErr[src], sp.pointer)
		}
		c.add(src, Problem{Code: prefix + "-" + sp.code, Severity: sev, Pointer: sp.pointer, Message: sp.message, Hint: sp.hint}, sp.keyPos)
	}
	for _, d := range src.pos.Duplicates() {
		p := Problem{Code: prefix + "-DUPLICATE-KEY", Severity: SeverityWarning, Pointer: d.Pointer,
			Message: "key appears more than once in the same object; only the last one counts",
			Hint:    "remove or merge the duplicates"}
		p.File = src.file
		if !c.synthetic[src] {
			p.Line, p.Column = src.position(d.Offset)
		}
		c.problems = append(c.problems, p)
	}
}

// ---- agent.json ----

func (c *checker) agent() {
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
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"allowedTools", r.Boundaries.AllowedTools}, {"disallowedTools", r.Boundaries.DisallowedTools}} {
		for i, p := range list.patterns {
			if err := tool.ValidatePattern(p); err != nil {
				c.report(a, "AC-TOOL-PATTERN", SeverityError, JoinPointer("runner", "boundaries", list.key, fmt.Sprint(i)),
					"write a tool name (\"Read\"), a glob (\"mcp__github__*\") or a name with a rule (\"Bash(git log:*)\")",
					"%v", err)
			}
		}
	}
	c.protectGlobs(a, "AC-PROTECT-GLOB", "/runner/verification/protect", r.Verification.Protect)
	c.hiddenGlobs(a, r.Verification.Hidden)
	if r.Verification.TestChanges == TestChangesHiddenTests && len(r.Verification.Hidden) == 0 {
		c.report(a, "AC-TESTCHANGES-HIDDEN", SeverityError, "/runner/verification/testChanges",
			"add hidden tests (runner.verification.hidden) that decide whether a test change is right, or use \"human\" to have a person decide",
			"testChanges %q accepts a test change only when the hidden tests pass, and the agent has none", r.Verification.TestChanges)
	}
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
	c.completion("/runner/completion", r.Completion)
	c.integrations()
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
	if provider, _, _ := strings.Cut(r.Model, ":"); provider == "claude-code" && (r.ContextWindow > 0 || r.Compaction != nil) {
		ptr := "/runner/compaction"
		if r.Compaction == nil {
			ptr = "/runner/contextWindow"
		}
		c.report(a, "AC-COMPACTION-IGNORED", SeverityWarning, ptr,
			"remove it; the Claude Code CLI manages its own context (see CLAUDE_CODE_AUTO_COMPACT_WINDOW in its documentation)",
			"runner.contextWindow and runner.compaction do not apply to the claude-code backend, which runs its own tool loop and compacts by itself")
	}
	if provider, _, _ := strings.Cut(r.Model, ":"); provider == "claude-code" && r.Requests != (Requests{}) {
		c.report(a, "AC-REQUESTS-IGNORED", SeverityWarning, "/runner/requests",
			"remove it, or run an API provider (--model anthropic:… / openai:…) where it applies",
			"runner.requests (request timeouts, retry-after ceiling) does not apply to the claude-code backend: the Claude Code CLI makes its own requests")
	}
	if provider, _, _ := strings.Cut(r.Model, ":"); provider == "claude-code" && r.Boundaries.MaxToolCallsPerTurn > 0 {
		c.report(a, "AC-TOOL-CALLS-IGNORED", SeverityWarning, "/runner/boundaries/maxToolCallsPerTurn",
			"remove it, or run an API provider (--model anthropic:… / openai:…) where capstan runs the tools",
			"runner.boundaries.maxToolCallsPerTurn does not apply to the claude-code backend: the Claude Code CLI runs the tool calls itself")
	}
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

// hardLimit is the loop's HARD_LIMIT (seed 002).
const hardLimit = 100

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

func known(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

// ---- parameters ----

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

// ---- steps_registry.json ----

func (c *checker) registry() {
	r := c.reg
	s := c.regSrc
	if vt := VerdictType(c.def); r.EntryStep == "" && len(r.EntryStepMapping) > 0 {
		c.report(s, "SR-ENTRY-STEP", SeverityError, "/entryStepMapping",
			fmt.Sprintf("add \"%s\": \"<step id>\" to entryStepMapping, or set entryStep", vt),
			"entryStepMapping has no entry for the agent's verdict type %q and entryStep is not set", vt)
	}
	refs := map[string]bool{} // validators referenced
	c.completionRefs(c.def.Runner.Completion, refs)
	parents := map[string]bool{} // steps listed as subSteps
	for _, id := range c.stepIDs {
		st := r.Steps[id]
		ptr := JoinPointer("steps", id)
		c.step(id, ptr, st)
		for _, cc := range st.CompletionConditions {
			refs[cc.Validator] = true
		}
		for _, sub := range st.SubSteps {
			parents[sub] = true
		}
	}
	for _, id := range c.stepIDs {
		if r.Steps[id].Type == "subStep" && !parents[id] {
			c.reportKey(s, "SR-SUBSTEP-ORPHAN", SeverityWarning, JoinPointer("steps", id),
				"list it in a parent step's subSteps, or change its type",
				"step %q has type subStep but no step lists it in subSteps, so it never runs", id)
		}
	}
	c.subStepCycles()
	c.validationSteps(refs)
	usedPatterns := map[string]bool{}
	for _, name := range c.validatorNames {
		v := r.Validators[name]
		c.validator(name, v)
		usedPatterns[v.FailurePattern] = true
		if !refs[name] {
			c.reportKey(s, "SR-VALIDATOR-UNUSED", SeverityWarning, JoinPointer("validators", name),
				"reference it from a step's completionConditions, a validation step's validationConditions or runner.completion.validators, or remove it",
				"validator %q is never used, so it never runs", name)
		}
	}
	for _, name := range sortedKeys(r.CompletionPatterns) {
		if !usedPatterns[name] {
			c.reportKey(s, "SR-PATTERN-UNUSED", SeverityWarning, JoinPointer("completionPatterns", name),
				"name it as a validator's failurePattern, or remove it",
				"completion pattern %q is not the failurePattern of any validator", name)
		}
	}
	c.reachability()
}

func (c *checker) completionRefs(comp Completion, refs map[string]bool) {
	for _, v := range comp.Validators {
		refs[v] = true
	}
	for _, sub := range comp.Conditions {
		c.completionRefs(sub, refs)
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
	runsTests := false
	for _, v := range c.reg.Validators {
		runsTests = runsTests || v.Type == "command" && RunsTests(v.Command)
	}
	if !runsTests {
		c.report(src, "AC-HIDDEN-INERT", SeverityError, "/runner/verification/hidden",
			"add a command validator that runs the tests (e.g. \"command\": \"go test -v ./...\") to a completion condition, or remove hidden",
			"hidden tests are run by the command validators that run tests, and the registry declares none")
	}
}

func (c *checker) step(id, ptr string, st Step) {
	s := c.regSrc
	c.protectGlobs(s, "SR-PROTECT-GLOB", ptr+"/protect", st.Protect)
	if st.StepID != "" && st.StepID != id {
		c.report(s, "SR-STEP-ID", SeverityError, ptr+"/stepId",
			fmt.Sprintf("set stepId to %q or remove it", id),
			"stepId %q differs from the step's key %q", st.StepID, id)
	}
	c.stepRunner(id, ptr, st)
	if st.Type != "gateway" && st.Runner == nil && len(st.SubSteps) == 0 && (st.C2 == "" || st.C3 == "") {
		c.report(s, "SR-STEP-PROMPT", SeverityError, ptr,
			"set c2 and c3: the prompt is {base}/{c1}/{c2}/{c3}/f_{edition}.md",
			"step %q runs a prompt but has no c2/c3", id)
	}
	if st.Model != "" {
		c.model(s, "SR", ptr+"/model", st.Model)
	}
	if st.Fallback != "" {
		if msg := LexicalInside(st.Fallback); msg != "" {
			c.report(s, "SR-PATH-OUTSIDE", SeverityError, ptr+"/fallback",
				"use a path relative to the prompts base that stays inside it", "fallback %q %s", st.Fallback, msg)
		}
	}
	if ch := st.Check; ch != nil {
		cp := ptr + "/check"
		need := func(ok bool, field, format string) {
			if !ok {
				c.report(s, "SR-CHECK-FIELD", SeverityError, cp+"/"+field, "add "+field, format, ch.Type)
			}
		}
		ignored := func(set bool, field, usedBy string) {
			if set {
				c.report(s, "SR-IGNORED-FIELD", SeverityError, cp+"/"+field, "remove it, or change type to "+usedBy,
					"%s has no effect on a %s check", field, ch.Type)
			}
		}
		switch ch.Type {
		case "keyword":
			need(nonBlank(ch.Keywords), "keywords", "a %s check needs at least one non-empty keyword")
		case "action":
			need(nonBlank(ch.Actions), "actions", "an %s check needs at least one tool name in actions")
		case "prompt":
			need(strings.TrimSpace(ch.Prompt) != "", "prompt", "a %s check needs the judging prompt")
		}
		if ch.Type != "" {
			ignored(len(ch.Keywords) > 0 && ch.Type != "keyword", "keywords", "keyword")
			ignored(len(ch.Actions) > 0 && ch.Type != "action", "actions", "action")
			ignored(ch.Prompt != "" && ch.Type != "prompt", "prompt", "prompt")
		}
		for _, tr := range []struct {
			key string
			t   Transition
		}{{"onPass", ch.OnPass}, {"onFail", ch.OnFail}} {
			tp := cp + "/" + tr.key
			n := 0
			for _, b := range []bool{tr.t.Next != "", tr.t.Complete, tr.t.Retry, tr.t.Escalate} {
				if b {
					n++
				}
			}
			if n != 1 {
				c.report(s, "SR-TRANSITION-AMBIGUOUS", SeverityError, tp,
					"set exactly one of next, complete, retry, escalate",
					"%s sets %d of next/complete/retry/escalate; exactly one is required", tr.key, n)
			}
		}
	}
	if rp := st.Retry; rp != nil {
		p := ptr + "/retry"
		if rp.OnExhausted != "fallback" && rp.FallbackStep != "" {
			c.report(s, "SR-IGNORED-FIELD", SeverityError, p+"/fallbackStep",
				"set onExhausted to \"fallback\", or remove fallbackStep",
				"fallbackStep has no effect unless onExhausted is fallback")
		}
	}
	if es := st.Escalation; es != nil {
		p := ptr + "/escalation"
		if es.WebhookURL != "" && es.NotificationMethod != "webhook" {
			c.report(s, "SR-IGNORED-FIELD", SeverityError, p+"/webhookUrl",
				"set notificationMethod to \"webhook\", or remove webhookUrl",
				"webhookUrl has no effect unless notificationMethod is webhook")
		}
	}
	for i, cc := range st.CompletionConditions {
		if _, ok := c.reg.Validators[cc.Validator]; !ok {
			c.report(s, "SR-CONDITION-VALIDATOR", SeverityError, fmt.Sprintf("%s/completionConditions/%d/validator", ptr, i),
				"define it under validators, or fix the name"+known(c.validatorNames),
				"validator %q does not exist", cc.Validator)
		}
	}
	// onFailure bounds completion attempts (step conditions and the run's
	// validators) and format retries (outputSchemaRef).
	if st.OnFailure != nil && len(c.reg.VerificationOf(id, st).Conditions) == 0 && len(c.def.Runner.Completion.Validators) == 0 && st.OutputSchemaRef == nil {
		c.report(s, "SR-IGNORED-FIELD", SeverityError, ptr+"/onFailure",
			"add completionConditions (or runner.completion.validators, or an outputSchemaRef), or remove onFailure",
			"onFailure has no effect: the step has no completionConditions, no outputSchemaRef, and runner.completion has no validators")
	}
	if ref := st.OutputSchemaRef; ref != nil {
		c.schemaRef(ptr+"/outputSchemaRef", ref)
	}
	for i, uv := range st.UVVariables {
		if st.suppliesInput(uv) {
			continue
		}
		c.uvVariable(fmt.Sprintf("%s/uvVariables/%d", ptr, i), uv)
	}
	c.flowStep(id, ptr, st)
}

// suppliesInput reports whether one of the step's inputs fills {uv-name}.
func (st Step) suppliesInput(name string) bool {
	for in, spec := range st.Inputs {
		if spec.Variable(in) == name {
			return true
		}
	}
	return false
}

func (c *checker) schemaRef(ptr string, ref *SchemaRef) {
	if ref.File == "" {
		return // the schema reports the missing key
	}
	if msg := LexicalInside(ref.File); msg != "" {
		c.report(c.regSrc, "SR-PATH-OUTSIDE", SeverityError, ptr+"/file",
			"name a file inside the agent's schemas/ folder, e.g. \"issue.schema.json\"", "schema file %q %s", ref.File, msg)
		return
	}
	dir := c.def.Runner.SchemasDir
	if dir == "" {
		dir = DefaultSchemasDir
	}
	c.file(c.regSrc, "SR", ptr+"/file", filepath.ToSlash(filepath.Join(dir, ref.File)), false, "SR-SCHEMA-FILE",
		"create the schema file under the agent's "+dir+"/ folder, or fix the file name")
}

func (c *checker) uvVariable(ptr, uv string) {
	s := c.regSrc
	if p, ok := c.def.Parameters[uv]; ok {
		if !p.Required && (len(p.Default) == 0 || string(p.Default) == "null") {
			then := fmt.Sprintf("a run must pass %s (PARAM_MISSING otherwise)", p.Flag(uv))
			if !c.runReaches(ptr) {
				then = fmt.Sprintf("runs from the entry step %q do not reach the step, so they do not need %s", c.reg.EntryStep, p.Flag(uv))
			}
			c.report(s, "PA-UV-OPTIONAL", SeverityWarning, ptr,
				fmt.Sprintf("make parameter %q required or give it a default", uv),
				"{uv-%s} is needed by this step but parameter %q is optional and has no default: %s", uv, uv, then)
		}
		return
	}
	if slices.Contains(c.opts.BuiltinVariables, uv) {
		return
	}
	hint := fmt.Sprintf("add parameter %q to agent.json (it supplies {uv-%s} from --%s)", uv, uv, strings.ReplaceAll(uv, "_", "-"))
	if trimmed, ok := strings.CutPrefix(uv, "uv-"); ok {
		if _, exists := c.def.Parameters[trimmed]; exists {
			hint = fmt.Sprintf("write %q: uvVariables name variables without the uv- prefix", trimmed)
		}
	}
	c.report(s, "PA-UV-UNSUPPLIED", SeverityError, ptr, hint, "no parameter supplies {uv-%s}", uv)
}

// validator checks what the validators' builder
// (verify.NewCompletionValidator) does not read: whether a test
// command is protected and lists each test, whether the pattern's params
// are extracted (warnings), and that a schema file exists in the agent
// folder. The rules of the fields the builder reads (the field the type
// needs, successWhen, the path, the handler, the schema resolving, the
// failure pattern, the extractors) are checked by the builder itself,
// which validate runs through the agent layer's checks.
func (c *checker) validator(name string, v Validator) {
	s := c.regSrc
	ptr := JoinPointer("validators", name)
	if v.Type == "command" && strings.TrimSpace(v.Command) != "" {
		if !c.protectsAnything() && RunsTests(v.Command) {
			c.report(s, "SR-TESTS-UNPROTECTED", SeverityWarning, ptr+"/command",
				"protect the tests and what configures them in agent.json, e.g. \"runner\": {\"verification\": {\"protect\": [\"**/*_test.go\", \"**/go.mod\"]}}",
				"validator %q runs tests (%s) but nothing is protected: the model can pass it by editing, skipping or deleting tests", name, v.Command)
		}
		if fixed, runner := VerboseTestCommand(v.Command); fixed != "" && c.def.Runner.Verification.TestBaselineOn() {
			c.report(s, "SR-TESTS-NOT-VERBOSE", SeverityWarning, ptr+"/command",
				"set \"command\": "+jsonText(fixed),
				"validator %q runs %s without listing each test: capstan cannot tell which tests were lost or skipped since the run started, %s", name, runner, knownWithout(runner))
		}
	}
	if v.Schema != nil && v.Type != "command" { // on a command validator it is SR-IGNORED-FIELD
		c.schemaRef(ptr+"/schema", v.Schema)
	}
	// A Go validator returns its own params.
	if pat, ok := c.reg.CompletionPatterns[v.FailurePattern]; ok && v.Type != "custom" {
		for _, param := range pat.Params {
			if _, ok := v.ExtractParams[param]; !ok {
				c.report(s, "SR-PATTERN-PARAM", SeverityWarning, ptr+"/extractParams",
					fmt.Sprintf("add %q to extractParams, or drop it from the pattern's params", param),
					"failure pattern %q needs param %q but validator %q does not extract it; the retry prompt gets it empty",
					v.FailurePattern, param, name)
			}
		}
	}
}

// has reports whether pointer exists in the file.
func (s *source) has(pointer string) bool {
	_, ok := s.pos.Span(pointer)
	return ok
}

// subStepCycles reports every step that (transitively) contains itself
// through subSteps.
func (c *checker) subStepCycles() {
	steps := c.reg.Steps
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	reported := map[string]bool{}
	var stack []string
	var visit func(id string)
	visit = func(id string) {
		color[id] = grey
		stack = append(stack, id)
		for _, sub := range steps[id].SubSteps {
			if _, ok := steps[sub]; !ok {
				continue
			}
			switch color[sub] {
			case white:
				visit(sub)
			case grey:
				i := slices.Index(stack, sub)
				cycle := append(slices.Clone(stack[i:]), sub)
				if !reported[sub] {
					reported[sub] = true
					c.report(c.regSrc, "SR-SUBSTEP-CYCLE", SeverityError, JoinPointer("steps", sub, "subSteps"),
						"break the cycle: a step cannot contain itself",
						"sub-step cycle: %s", strings.Join(cycle, " → "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
	}
	for _, id := range c.stepIDs {
		if color[id] == white {
			visit(id)
		}
	}
}

// reachability warns about steps that no path from entryStep reaches.
func (c *checker) reachability() {
	seen := c.reachableSteps()
	if seen == nil {
		return
	}
	for _, id := range c.stepIDs {
		if !seen[id] && c.reg.Steps[id].Type != "subStep" {
			c.reportKey(c.regSrc, "SR-STEP-UNREACHABLE", SeverityWarning, JoinPointer("steps", id),
				"add a transition to it (check.onPass/onFail.next, fallbackStep, escalateTo, subSteps, transitions, entryStepMapping), or remove it",
				"%s", c.unreachableWhy(id))
		}
	}
}

func pruneZero(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch e := e.(type) {
			case string:
				if e == "" {
					delete(x, k)
					continue
				}
			case float64:
				if e == 0 {
					delete(x, k)
					continue
				}
			}
			x[k] = pruneZero(e)
		}
	case []any:
		for i, e := range x {
			x[i] = pruneZero(e)
		}
	}
	return v
}

func nonBlank(xs []string) bool {
	if len(xs) == 0 {
		return false
	}
	for _, x := range xs {
		if strings.TrimSpace(x) == "" {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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

// RunsTests reports whether a validator command runs a test runner (go
// test, pytest, unittest, jest, vitest, cargo test, npm test, …).
func RunsTests(command string) bool { return testRunnerRE().MatchString(command) }

// verboseFlags are, per test runner that capstan reads, the pattern that
// finds it in a command, the flags that make it list each test, and the
// flag to add.
var verboseFlags = []struct {
	runner string
	find   func() *regexp.Regexp
	has    func() *regexp.Regexp
	add    string
}{
	{"go test", lazyre.New(`\bgo test\b`), lazyre.New(`(^|\s)-(test\.)?(v|json)(=true)?(\s|$)`), " -v"},
	{"pytest", lazyre.New(`\bpytest\b`), lazyre.New(`(^|\s)(-v+|--verbose)(\s|$)`), " -v"},
	{"unittest", lazyre.New(`\bunittest\b`), lazyre.New(`(^|\s)(-v|--verbose)(\s|$)`), " -v"},
	{"jest", lazyre.New(`\bjest\b`), lazyre.New(`(^|\s)--verbose(=true)?(\s|$)`), " --verbose"},
	{"vitest", lazyre.New(`\bvitest( run)?\b`), lazyre.New(`--reporter[= ]verbose\b`), " --reporter=verbose"},
}

// VerboseTestCommand returns command with the flag that makes its test
// runner list each test (go test -v, pytest -v, python -m unittest -v,
// jest --verbose, vitest --reporter=verbose), and the runner's name; ""
// when command runs none of them or already lists each test.
func VerboseTestCommand(command string) (fixed, runner string) {
	for _, f := range verboseFlags {
		loc := f.find().FindStringIndex(command)
		if loc == nil {
			continue
		}
		rest := command[loc[1]:]
		quiet := f.runner == "pytest" && pytestQuiet().MatchString(rest)
		if f.has().MatchString(rest) && !quiet {
			return "", ""
		}
		if quiet { // -q takes back a -v
			rest = pytestQuiet().ReplaceAllString(rest, "$1")
		}
		return command[:loc[1]] + f.add + rest, f.runner
	}
	return "", ""
}

// knownWithout says what the no-lost-tests check still knows of a runner
// that does not list each test.
func knownWithout(runner string) string {
	if runner == "go test" {
		return "only whether any test ran"
	}
	return "only whether fewer or no tests ran"
}

// pytestQuiet finds pytest's -q, which cancels a -v.
var pytestQuiet = lazyre.New(`\s-q+(\s|$)`)

// jsonText is s as a JSON string, for hints to paste into a JSON file.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
