package agentdir

// Defaults applied by ApplyDefaults to what an agent folder leaves unset.
const (
	DefaultC1      = "steps"
	DefaultEdition = "default"
	// DefaultStepLoopLimit is the consecutive-entry limit of a step
	// entered by a check move when the registry sets no stepLoopLimit.
	DefaultStepLoopLimit  = 10
	DefaultMaxRetries     = 3
	DefaultPermissionMode = "default"
	DefaultPromptsBase    = "prompts"
	DefaultSchemasDir     = "schemas"
	DefaultStepType       = "normal"
	DefaultOnExhausted    = "error"
	// DefaultVersion is the version of an agent definition that sets none.
	DefaultVersion = "1.0.0"
)

// ApplyDefaults fills unset fields of def and reg in place: version
// "1.0.0", registry file steps_registry.json, the registry's agentId (the
// definition's name), its entryStep (the only step, when it has one step
// and no entryStepMapping), c1 "steps", step edition "default",
// retry maxRetries 3 and onExhausted "error" (when retry is set without
// them), permissionMode
// "default", prompts base "prompts", step type "normal", stepId = the
// step's key. climpt's spellings (runner.flow, runner.verdict,
// failurePatterns, entryStepMapping, step type "prompt") are first copied
// into the fields they mean (see docs/climpt.md). Either argument may be
// nil.
func ApplyDefaults(def *Definition, reg *Registry) {
	if def != nil {
		normalizeDefinition(def)
	}
	if def != nil && reg != nil {
		normalizeRegistry(def, reg)
		if reg.AgentID == "" {
			reg.AgentID = def.Name
		}
	}
	if def != nil {
		if def.Version == "" {
			def.Version = DefaultVersion
		}
		p := &def.Runner.Prompts
		if p.Registry == "" {
			p.Registry = DefaultRegistryFile
		}
		if p.Base == "" {
			p.Base = DefaultPromptsBase
		}
		if def.Runner.SchemasDir == "" {
			def.Runner.SchemasDir = DefaultSchemasDir
		}
		if def.Runner.Boundaries.PermissionMode == "" {
			def.Runner.Boundaries.PermissionMode = DefaultPermissionMode
		}
	}
	if reg == nil {
		return
	}
	if reg.C1 == "" {
		reg.C1 = DefaultC1
	}
	// After the climpt spellings, which may name the entry step
	// (entryStepMapping, detect:graph's config.entryStep).
	if reg.EntryStep == "" && len(reg.EntryStepMapping) == 0 && len(reg.Steps) == 1 {
		for id := range reg.Steps {
			reg.EntryStep = id
		}
	}
	// stepLoopLimit stays unset when the registry does not set it: the
	// step machine applies DefaultStepLoopLimit to moves by check, and no
	// limit to the moves of a flow routed by intent, which loops on its
	// continuation step by design (its budgets bound it).
	for id, st := range reg.Steps {
		if st.StepID == "" {
			st.StepID = id
		}
		if st.Edition == "" {
			st.Edition = DefaultEdition
		}
		if st.Type == "" {
			st.Type = DefaultStepType
		}
		if st.Retry != nil && (st.Retry.MaxRetries == nil || st.Retry.OnExhausted == "") {
			r := *st.Retry
			if r.MaxRetries == nil {
				n := DefaultMaxRetries
				r.MaxRetries = &n
			}
			if r.OnExhausted == "" {
				r.OnExhausted = DefaultOnExhausted
			}
			st.Retry = &r
		}
		reg.Steps[id] = st
	}
}
