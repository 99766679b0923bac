package agenterr

// Codes of the contract-checked reasoning pipeline (package pipeline). They
// live in their own file so that additions by other parts do not collide
// with them.
const (
	// CodePipelineCompile: the pipeline cannot run as declared (unknown
	// dependency, cycle, precondition produced by no earlier stage or input,
	// concurrent writers of one key, bad key name). Reported before any
	// stage runs.
	CodePipelineCompile = "PIPELINE_COMPILE"
	// CodePipelineSpec: a pipeline YAML file is malformed.
	CodePipelineSpec = "PIPELINE_SPEC"
	// CodeContractViolation: a stage's preconditions or postconditions do
	// not hold, and the pipeline was stopped because of it.
	CodeContractViolation = "CONTRACT_VIOLATION"
	// CodeNamespaceViolation: a stage wrote (or tried to write) a key that
	// is not among its postconditions.
	CodeNamespaceViolation = "NAMESPACE_VIOLATION"
	// CodeStageFailed: a stage returned an error (after its retries).
	CodeStageFailed = "STAGE_FAILED"
	// CodeStageTimeout: a stage attempt exceeded its timeout.
	CodeStageTimeout = "STAGE_TIMEOUT"
	// CodeStagePanic: a stage panicked; the panic was recovered and turned
	// into an error for that stage.
	CodeStagePanic = "STAGE_PANIC"
	// CodeStageOutput: a model or agent stage returned output that does not
	// match the stage's JSON schema.
	CodeStageOutput = "STAGE_OUTPUT"
	// CodeContextValue: a value given to AgentContext.Set or SetInput is not
	// JSON-compatible or is too large, or an input name is malformed.
	CodeContextValue = "CONTEXT_VALUE"
	// CodeGit: running git failed (not a repository, bad revision, git
	// missing).
	CodeGit = "GIT"
	// CodePipelineValidation: the pipeline ran, but its validation stage
	// found a number no cited fact backs, or a conclusion without evidence.
	CodePipelineValidation = "PIPELINE_VALIDATION"
)

// Sentinels for the pipeline codes, for errors.Is.
var (
	ErrPipelineCompile    = sentinel(CodePipelineCompile, LayerPipeline, false)
	ErrPipelineSpec       = sentinel(CodePipelineSpec, LayerPipeline, false)
	ErrContractViolation  = sentinel(CodeContractViolation, LayerPipeline, false)
	ErrNamespaceViolation = sentinel(CodeNamespaceViolation, LayerPipeline, false)
	ErrStageFailed        = sentinel(CodeStageFailed, LayerPipeline, true)
	ErrStageTimeout       = sentinel(CodeStageTimeout, LayerPipeline, true)
	ErrStagePanic         = sentinel(CodeStagePanic, LayerPipeline, false)
	ErrStageOutput        = sentinel(CodeStageOutput, LayerPipeline, true)
	ErrGit                = sentinel(CodeGit, LayerPipeline, false)
	ErrContextValue       = sentinel(CodeContextValue, LayerPipeline, false)
	ErrPipelineValidation = sentinel(CodePipelineValidation, LayerPipeline, false)
)
