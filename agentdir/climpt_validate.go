package agentdir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// climpt checks climpt's spellings: conflicts with capstan's own field,
// verdict settings that cannot work, and climpt settings capstan does not
// act on (warnings that say so, never silence).
func (c *checker) climpt() {
	a := c.agentSrc
	r := c.def.Runner
	conflict := func(src *source, climptPtr, capstanName string, climptVal, capstanVal any) {
		c.report(src, "AC-SPELLING-CONFLICT", SeverityError, climptPtr,
			"keep one of the two spellings",
			"%s (%v) and %s (%v) are both set and differ; they mean the same setting", strings.TrimPrefix(strings.ReplaceAll(climptPtr, "/", "."), "."), climptVal, capstanName, capstanVal)
	}
	inert := func(src *source, ptr, format string, args ...any) {
		c.report(src, "AC-CLIMPT-INERT", SeverityWarning, ptr, "remove it, or keep it for climpt; capstan ignores it", format, args...)
	}
	if f := r.Flow; f != nil {
		if f.SystemPromptPath != "" && f.SystemPromptPath != r.SystemPromptPath {
			conflict(a, "/runner/flow/systemPromptPath", "runner.systemPromptPath", f.SystemPromptPath, r.SystemPromptPath)
		}
		if p := f.Prompts; p != nil {
			if p.Registry != "" && p.Registry != r.Prompts.Registry {
				conflict(a, "/runner/flow/prompts/registry", "runner.prompts.registry", p.Registry, r.Prompts.Registry)
			}
			if p.FallbackDir != "" && p.FallbackDir != r.Prompts.FallbackDir {
				conflict(a, "/runner/flow/prompts/fallbackDir", "runner.prompts.fallbackDir", p.FallbackDir, r.Prompts.FallbackDir)
			}
		}
		if s := f.Schemas; s != nil {
			if s.Base != "" && s.Base != r.SchemasDir {
				conflict(a, "/runner/flow/schemas/base", "runner.schemasDir", s.Base, r.SchemasDir)
			}
			if s.Inspection != nil && *s.Inspection {
				inert(a, "/runner/flow/schemas/inspection", "climpt's schema inspection mode has no counterpart in capstan, which always validates structured output against its schema")
			}
		}
		if f.DefaultModel != "" && ClimptModel(f.DefaultModel) != r.Model {
			conflict(a, "/runner/flow/defaultModel", "runner.model", ClimptModel(f.DefaultModel), r.Model)
		}
		if f.AskUserAutoResponse != "" {
			inert(a, "/runner/flow/askUserAutoResponse", "capstan offers the model no AskUserQuestion tool, so there is no question to answer; the run never waits for a user")
		}
	}
	if v := r.Verdict; v != nil && v.Type != "" {
		if want := verdictCompletion(*v, c.def.Parameters, "", "", nil); !sameJSON(want, r.Completion) {
			c.report(a, "AC-SPELLING-CONFLICT", SeverityError, "/runner/verdict",
				"keep runner.verdict or runner.completion, not both",
				"runner.verdict (%s) and runner.completion (%s) are both set and mean different completions", v.Type, r.Completion.Type)
		}
		// A verdict's maxIterations other than count:iteration's is the run's
		// iteration budget; runner.budgets.maxIterations written too wins.
		if n := v.Config.MaxIterations; n > 0 && v.Type != VerdictCountIteration && r.Budgets.MaxIterations != n {
			conflict(a, "/runner/verdict/config/maxIterations", "runner.budgets.maxIterations", n, r.Budgets.MaxIterations)
		}
		c.verdict("/runner/verdict", *v)
	}
	if len(r.Actions) > 0 {
		inert(a, "/runner/actions", "climpt's action blocks (```<type> in the response, handed to handlers) are not detected by capstan; climpt itself does not run them either")
	}
	if len(r.Execution) > 0 {
		inert(a, "/runner/execution", "capstan does not create git worktrees or merge, push or open pull requests after a run: it works in --workdir (default: the current folder); create the worktree first and pass it with --workdir")
	}
	if len(r.Logging) > 0 {
		inert(a, "/runner/logging", "capstan journals every run in its state folder (see `capstan runs`, `capstan show`); climpt's log directory, format and maxFiles are not used")
	}
	if c.dir != "" && c.def.FS() == nil {
		if fi, err := os.Stat(filepath.Join(c.dir, "config.json")); err == nil && fi.Mode().IsRegular() {
			c.problems = append(c.problems, Problem{Code: "AC-CLIMPT-INERT", Severity: SeverityWarning, File: "config.json",
				Message: "config.json is not read by capstan (climpt's runner does not load it either); settings belong in agent.json",
				Hint:    "move what you need into agent.json, or remove config.json"})
		}
	}
	c.climptSandbox()
	c.climptRegistry()
}

// climptSandbox checks climpt's spellings inside runner.boundaries.sandbox,
// read from the file (capstan's Sandbox has no field for them).
func (c *checker) climptSandbox() {
	var doc struct {
		Runner struct {
			Boundaries struct {
				Sandbox map[string]json.RawMessage `json:"sandbox"`
			} `json:"boundaries"`
		} `json:"runner"`
	}
	if json.Unmarshal(c.agentSrc.raw, &doc) != nil {
		return
	}
	sb := doc.Runner.Boundaries.Sandbox
	a := c.agentSrc
	const ptr = "/runner/boundaries/sandbox"
	c.sandboxNetwork(a, ptr+"/network")
	if _, ok := sb["filesystem"]; ok {
		c.report(a, "AC-SANDBOX-UNSUPPORTED", SeverityError, ptr+"/filesystem",
			"remove it; sandboxed commands write inside the work dir (--workdir)",
			"capstan's sandbox cannot make further paths writable")
	}
	if _, ok := sb["excludedCommands"]; ok {
		c.report(a, "AC-SANDBOX-UNSUPPORTED", SeverityError, ptr+"/excludedCommands",
			`remove it, or set "enabled": false to run every command unsandboxed`,
			"capstan's sandbox runs every command sandboxed; it cannot exempt some")
	}
	if _, ok := sb["allowUnsandboxedCommands"]; ok {
		c.report(a, "AC-CLIMPT-INERT", SeverityWarning, ptr+"/allowUnsandboxedCommands", "remove it",
			"the model cannot ask capstan to run a command outside the sandbox; allowUnsandboxed (commands run unsandboxed where the kernel cannot sandbox) is a different setting")
	}
}

// sandboxNetwork checks runner.boundaries.sandbox.network: every allow
// entry is host:port, and climpt's domain modes, which capstan cannot
// enforce, are refused with the spelling that works.
func (c *checker) sandboxNetwork(a *source, ptr string) {
	sb := c.def.Runner.Boundaries.Sandbox
	if sb == nil || sb.Network == nil {
		return
	}
	n := sb.Network
	if n.Mode != "" && n.Mode != "none" && n.Mode != "trusted" && n.Mode != "custom" {
		c.report(a, "AC-SANDBOX-NETWORK", SeverityError, ptr+"/mode",
			`write "mode": "custom" with "trustedDomains", "mode": "none", or list host:port pairs in "allow"`,
			"network mode %q is not one of climpt's (trusted, custom, none)", n.Mode)
	}
	if (n.Mode == "trusted" || n.Mode == "custom") && n.TrustedDomains == nil {
		c.report(a, "AC-SANDBOX-UNSUPPORTED", SeverityError, ptr,
			`list the domains: "network": {"mode": "custom", "trustedDomains": ["api.example.com"]}, or host:port pairs in "allow" (or "network": true for every host, unfiltered)`,
			"network mode %q without trustedDomains means climpt's own list of domains, which capstan does not copy", n.Mode)
	}
	if n.Mode == "none" && (len(n.Allow) > 0 || len(n.TrustedDomains) > 0) {
		c.report(a, "AC-SANDBOX-NETWORK", SeverityError, ptr+"/mode",
			`remove "mode": "none" to allow the listed hosts, or the allow list and trustedDomains to have no network`,
			`"mode": "none" (no network) and a list of hosts say different things`)
	}
	if !sb.On() && (n.All || len(n.Allow) > 0 || len(n.TrustedDomains) > 0) {
		c.report(a, "AC-SANDBOX-NETWORK-INERT", SeverityWarning, ptr,
			`remove "network", or "enabled": false to keep the sandbox`,
			`the sandbox is off ("enabled": false): commands reach the whole network with your rights, and this setting does nothing`)
	}
	for i, e := range n.Allow {
		if _, err := ParseNetworkAllow(e); err != nil {
			c.report(a, "AC-SANDBOX-NETWORK", SeverityError, fmt.Sprintf("%s/allow/%d", ptr, i),
				"write host:port, e.g. api.example.com:443, 127.0.0.1:8080 or [::1]:8443", "%v", err)
		}
	}
	for i, d := range n.TrustedDomains {
		p := fmt.Sprintf("%s/trustedDomains/%d", ptr, i)
		if strings.Contains(d, "*") {
			c.report(a, "AC-SANDBOX-NETWORK", SeverityError, p,
				fmt.Sprintf("list each host the agent needs instead (for example %q): the sandbox's allow-list names hosts, not patterns",
					"api."+strings.TrimLeft(d, "*.")),
				"trusted domain %q is a wildcard, which capstan's sandbox does not match", d)
			continue
		}
		if _, err := ParseNetworkAllow(TrustedDomainPair(d)); err != nil {
			c.report(a, "AC-SANDBOX-NETWORK", SeverityError, p,
				"write a host name (reached at port 443), e.g. api.example.com, or host:port", "trusted domain %q: %v", d, err)
		}
	}
}

// verdict checks a climpt runner.verdict (or one composite condition).
func (c *checker) verdict(ptr string, v Verdict) {
	a := c.agentSrc
	cp := ptr + "/config"
	cfg := v.Config
	c.inertVerdictFields(cp, v)
	switch v.Type {
	case VerdictPollState:
		c.pollStateVerdict(ptr, cp, cfg)
	case VerdictDetectStructured:
		if cfg.SignalType == "" {
			c.report(a, "AC-VERDICT-FIELD", SeverityError, cp+"/signalType",
				"set signalType to the fence tag the model writes, e.g. \"task-complete\" for a ```task-complete block",
				"detect:structured needs signalType")
		}
	case VerdictDetectGraph:
		if p := cfg.RegistryPath; p != "" && filepath.Clean(p) != filepath.Clean(c.def.Runner.Prompts.Registry) {
			c.report(a, "AC-VERDICT-FIELD", SeverityError, cp+"/registryPath",
				"remove registryPath: the graph is the agent's steps registry (runner.flow.prompts.registry)",
				"registryPath %q is not the agent's steps registry %q", p, c.def.Runner.Prompts.Registry)
		}
	case VerdictMetaComposite:
		for i, sub := range cfg.Conditions {
			sp := fmt.Sprintf("%s/conditions/%d", cp, i)
			if strings.HasPrefix(sub.Type, "meta:") {
				c.verdictUnsupported(sp+"/type", "list the conditions of the inner composite in this one",
					"a meta:composite condition cannot be %s", sub.Type)
				continue
			}
			if sub.Config.MaxIterations > 0 && sub.Type != VerdictCountIteration {
				c.report(a, "AC-CLIMPT-INERT", SeverityWarning, sp+"/config/maxIterations",
					"set the iteration budget on the composite (config.maxIterations) or in runner.budgets.maxIterations",
					"a composite condition's maxIterations has no effect unless its type is %s", VerdictCountIteration)
			}
			c.verdict(sp, sub)
		}
	case VerdictMetaCustom:
		if cfg.HandlerPath != "" {
			c.verdictUnsupported(cp+"/handlerPath",
				"write the handler in Go, give it to the agent (agent.Config.CompletionHandlers) and use \"completion\": {\"type\": \"custom\", \"handler\": \"NAME\"}",
				"meta:custom loads climpt's handler module %q, which capstan cannot run", cfg.HandlerPath)
		}
	}
}

// inertVerdictFields warns of verdict config fields its type does not
// read, and of the iteration and counter parameters nothing reads.
func (c *checker) inertVerdictFields(cp string, v Verdict) {
	a := c.agentSrc
	cfg := v.Config
	uses := map[string][]string{
		VerdictPollState:        {"maxIterations", "resourceType", "targetState", "issueParam", "type"},
		VerdictCountIteration:   {"maxIterations", "iterationParam"},
		VerdictCountCheck:       {"maxIterations", "maxChecks", "counterParam"},
		VerdictDetectKeyword:    {"maxIterations", "verdictKeyword"},
		VerdictDetectStructured: {"maxIterations", "signalType", "requiredFields"},
		VerdictDetectGraph:      {"maxIterations", "registryPath", "entryStep"},
		VerdictMetaComposite:    {"maxIterations", "operator", "conditions"},
		VerdictMetaCustom:       {"maxIterations", "handlerPath"},
	}
	var set map[string]json.RawMessage
	if raw, err := json.Marshal(cfg); err == nil {
		_ = json.Unmarshal(raw, &set)
	}
	for _, k := range sortedKeys(set) {
		if used, ok := uses[v.Type]; ok && !slices.Contains(used, k) {
			c.report(a, "AC-CLIMPT-INERT", SeverityWarning, cp+"/"+k, "remove it",
				"%s has no effect with verdict type %s", k, v.Type)
		}
	}
	if cfg.IterationParam != "" || cfg.CounterParam != "" {
		k := "iterationParam"
		if cfg.IterationParam == "" {
			k = "counterParam"
		}
		c.report(a, "AC-CLIMPT-INERT", SeverityWarning, cp+"/"+k, "remove it",
			"%s is read by nothing (neither climpt nor capstan); the iteration count is the {uv-iteration} variable", k)
	}
}

// pollStateVerdict checks a poll:state verdict: a GitHub issue, its state
// as a string, and the parameter that holds its number.
func (c *checker) pollStateVerdict(ptr, cp string, cfg VerdictConfig) {
	a := c.agentSrc
	if rt := cfg.ResourceType; rt != "" && rt != "github-issue" {
		c.verdictUnsupported(cp+"/resourceType", "poll a GitHub issue (resourceType \"github-issue\"), or check the state with a command validator",
			"poll:state resource %q cannot be polled by capstan; only github-issue is", rt)
	}
	if t := cfg.Type; t != "" && t != "issueClose" {
		c.verdictUnsupported(cp+"/type", "use \"issueClose\" or remove it", "poll:state sub-type %q is not known; only issueClose (wait until the issue is closed) is", t)
	}
	var state string
	if len(cfg.TargetState) > 0 && (json.Unmarshal(cfg.TargetState, &state) != nil || state == "") {
		c.verdictUnsupported(cp+"/targetState", "write the issue state as a string, e.g. \"closed\"", "targetState must be a non-empty string naming the issue's state")
	}
	param := cfg.IssueParam
	if param == "" {
		param = "issue"
	}
	if _, ok := c.def.Parameters[param]; !ok {
		p := cp + "/issueParam"
		if cfg.IssueParam == "" {
			p = ptr
		}
		c.report(a, "AC-VERDICT-ISSUE-PARAM", SeverityError, p,
			fmt.Sprintf("add a number parameter %q to agent.json (\"parameters\": {\"%s\": {\"type\": \"number\", \"required\": true, \"cli\": \"--%s\"}}), or name yours in config.issueParam", param, param, kebab(param)),
			"poll:state polls the issue whose number is parameter %q, which does not exist", param)
	}
}

// climptRegistry checks the registry's climpt fields.
func (c *checker) climptRegistry() {
	s := c.regSrc
	r := c.reg
	for _, k := range []struct{ ptr, val, want string }{
		{"/pathTemplate", r.PathTemplate, StandardPathTemplate},
		{"/pathTemplateNoAdaptation", r.PathTemplateNoAdaptation, StandardPathTemplateNoAdaptation},
	} {
		if k.val != "" && k.val != k.want {
			c.report(s, "SR-PATH-TEMPLATE", SeverityError, k.ptr,
				fmt.Sprintf("use %q (capstan's prompt layout) and move the prompt files to match", k.want),
				"prompt path template %q is not capstan's fixed layout %q", k.val, k.want)
		}
	}
	var doc struct {
		Steps map[string]map[string]json.RawMessage `json:"steps"`
	}
	_ = json.Unmarshal(c.regSrc.raw, &doc)
	for _, id := range c.stepIDs {
		for _, k := range []string{"condition", "priority"} {
			if _, ok := doc.Steps[id][k]; ok {
				c.report(s, "SR-CLIMPT-INERT", SeverityWarning, JoinPointer("steps", id, k), "remove it; entryStepMapping and transitions decide which step runs",
					"a step's %s is read by neither climpt's runner nor capstan", k)
			}
		}
		if u := r.Steps[id].UsesStdin; u != nil && *u {
			c.report(s, "SR-STDIN-UNSUPPORTED", SeverityError, JoinPointer("steps", id, "usesStdin"),
				"set usesStdin to false and pass the text as a parameter ({uv-NAME}) instead",
				"capstan does not read standard input into prompts ({input_text})")
		}
	}
	for _, name := range sortedKeys(r.FailurePatterns) {
		if have, ok := r.CompletionPatterns[name]; ok && !sameJSON(have, r.FailurePatterns[name]) {
			c.report(s, "SR-SPELLING-CONFLICT", SeverityError, JoinPointer("failurePatterns", name),
				"keep the pattern under one of failurePatterns and completionPatterns",
				"failure pattern %q is defined differently under failurePatterns and completionPatterns", name)
		}
	}
	types := VerdictTypes()
	for _, key := range sortedKeys(r.EntryStepMapping) {
		ptr := JoinPointer("entryStepMapping", key)
		if _, ok := types[key]; !ok {
			c.report(s, "SR-ENTRY-MAPPING-KEY", SeverityWarning, ptr,
				"key entries by verdict type: "+strings.Join(sortedKeys(types), ", "),
				"%q is not a verdict type, so this entry is never used", key)
		}
		if _, ok := r.Steps[r.EntryStepMapping[key]]; !ok { // the builder's "entryStep is not a step" then is not repeated
			c.report(s, "SR-ENTRY-STEP", SeverityError, ptr, c.stepHint,
				"entryStepMapping[%q] %q is not a step", key, r.EntryStepMapping[key])
		}
	}
	if vt := VerdictType(c.def); vt != "" && r.EntryStepMapping[vt] != "" {
		var top struct {
			EntryStep string `json:"entryStep"`
		}
		_ = json.Unmarshal(c.regSrc.raw, &top)
		if written := top.EntryStep; written != "" && written != r.EntryStepMapping[vt] {
			c.report(s, "SR-ENTRY-STEP-OVERRIDDEN", SeverityWarning, "/entryStep",
				"remove entryStep, or the entryStepMapping entry",
				"entryStep %q is not used: entryStepMapping[%q] %q comes first", written, vt, r.EntryStepMapping[vt])
		}
	}
}

// verdictUnsupported reports a verdict setting capstan cannot act on.
func (c *checker) verdictUnsupported(p, hint, format string, args ...any) {
	c.report(c.agentSrc, "AC-VERDICT-UNSUPPORTED", SeverityError, p, hint, format, args...)
}
