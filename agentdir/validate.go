package agentdir

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/lazyre"
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
		"--accept-changed-definition", "--allow-key-in-ancestors", "--base-url", "--chain-for", "--connect-timeout", "--continue-every",
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
// and cross-references, and reports every problem at once; it has no side
// effects. def and reg are
// normally Load's results after ApplyDefaults; definitions built in Go are
// validated too, without line:col.
func Validate(def *Definition, reg *Registry, opts ValidateOptions) ValidationResult {
	if def == nil {
		def = &Definition{}
	}
	if reg == nil {
		reg = &Registry{}
	}
	c := &checker{opts: opts, def: def, reg: reg, schemaErr: map[*source][]string{}, typeErr: map[*source][]string{}, synthetic: map[*source]bool{}}
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
			} else if p.Pointer == "/entryStep" && reg.entryFromVerdict {
				p.File, p.Pointer = AgentFile, "/runner/verdict/config/entryStep"
			} else {
				p.Pointer = c.regSrc.aliases.actual(p.Pointer)
			}
			if (p.Code == agenterr.CodeConfigurationValidation || c.hasCode(p.Code)) && c.reported(p) || p.Code == "SR-ENTRY-STEP" && c.hasCode(p.Code) {
				continue // a builder's error where a rule above already reported one: one cause, one report
			}
			if p.Code == "SR-ENTRY-STEP" && len(reg.EntryStepMapping) > 0 && (c.schemaCovers(c.regSrc, "/entryStepMapping") || c.completionTypeMistyped()) {
				continue // the entry step is looked up with a value of the wrong type: its schema error says so
			}
			if p.Code == "SR-SCHEMA-UNRESOLVED" && c.errorAt(p.File, p.Pointer+"/file") {
				continue // the schema file is missing or outside its folder: SR-SCHEMA-FILE or SR-PATH-OUTSIDE says so
			}
			src := c.regSrc
			if p.File == AgentFile {
				src = c.agentSrc
			}
			if c.schemaCovers(src, p.Pointer) || slices.ContainsFunc(p.FollowsFrom, func(ptr string) bool { return c.schemaCovers(c.regSrc, ptr) }) {
				continue // the value has the wrong type: the schema error says so
			}
			c.add(src, p, false)
		}
	}
	c.demoteUnreachable()
	return NewValidationResult(c.problems...)
}

// completionTypeMistyped reports whether agent.json's verdict or
// completion (whose type picks the entryStepMapping entry) has a member of
// the wrong type.
func (c *checker) completionTypeMistyped() bool {
	return c.schemaCovers(c.agentSrc, "/runner/verdict") || c.schemaCovers(c.agentSrc, "/runner/completion")
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
	typeErr          map[*source][]string // pointers with SCHEMA-TYPE errors (values decoded as zero)
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
// it, or a type error at a member of it: a member of the wrong type is
// decoded as its zero value, so a problem about the object (a step whose
// c2 is 7 "has no c2") is that type error again.
func (c *checker) schemaCovers(src *source, ptr string) bool {
	for _, s := range c.schemaErr[src] {
		if ptr == s || strings.HasPrefix(ptr, s+"/") {
			return true
		}
	}
	for _, s := range c.typeErr[src] {
		if member, ok := strings.CutPrefix(s, ptr+"/"); ok && !strings.Contains(member, "/") {
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
			if sp.code == "SCHEMA-TYPE" {
				c.typeErr[src] = append(c.typeErr[src], sp.pointer)
			}
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

// hardLimit is the most iterations any run may start (the loop's
// HARD_LIMIT); a budget above it is reported as never reached.
const hardLimit = 100

func known(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

// ---- parameters ----

// ---- steps_registry.json ----

// has reports whether pointer exists in the file.
func (s *source) has(pointer string) bool {
	_, ok := s.pos.Span(pointer)
	return ok
}

func pruneZero(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch e := e.(type) {
			case nil: // a nil map, slice or pointer of a Go value: unset
				delete(x, k)
				continue
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

// jsonText is s as a JSON string, for hints to paste into a JSON file.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
