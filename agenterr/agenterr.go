// Package agenterr defines the single error type used across capstan.
//
// Every error carries a stable, machine-readable Code, a Layer that says
// which part of capstan it comes from (configuration, lifecycle, loop, model
// backend, completion, step, prompt, ...), and whether it is recoverable.
// climpt has one error class per part (ConfigurationError, LifecycleError,
// LoopError, SdkBridgeError, CompletionError, PromptError); capstan models
// them as one type, [Error], told apart by Layer.
//
// Errors compare by code: errors.Is(err, agenterr.ErrPromptNotFound) is true
// for any *Error in err's chain whose Code equals that sentinel's code, so
// callers can match categories without caring about the message or the
// wrapped cause.
package agenterr

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Layer names the part of capstan an error comes from; it is printed with
// the error and recorded in the journal.
type Layer string

// The parts of capstan an error can come from.
const (
	LayerConfiguration Layer = "configuration" // loading and checking an agent's definition
	LayerLifecycle     Layer = "lifecycle"     // starting and stopping an agent
	LayerLoop          Layer = "loop"          // the iteration loop
	LayerSDKBridge     Layer = "sdk_bridge"    // talking to the model backend
	LayerCompletion    Layer = "completion"    // checking a declared completion
	LayerStep          Layer = "step"          // steps and their transitions
	LayerPrompt        Layer = "prompt"        // resolving prompt templates
	LayerTool          Layer = "tool"
	LayerSkill         Layer = "skill"
	LayerSandbox       Layer = "sandbox"
	LayerPipeline      Layer = "pipeline"
	LayerInternal      Layer = "internal"
)

// Error is capstan's error type. It carries a stable Code, the Layer that
// raised it, whether the failure is Recoverable (a retry or an alternative
// path may succeed) and an optional wrapped cause.
//
// Optional location fields (File, Pointer, Line, Column) and Hint make
// configuration errors actionable; they are empty for runtime errors.
type Error struct {
	Code        string
	Layer       Layer
	Recoverable bool
	Message     string
	File        string // file the problem is in, relative to the agent dir when possible
	Pointer     string // JSON pointer inside File ("/runner/model"), when known
	Line        int    // 1-based line in File, when known
	Column      int    // 1-based column in File, when known
	Hint        string // what the user can do about it
	Err         error  // wrapped cause
	// RetryAfter is how long the server asked the caller to wait before
	// trying again (a rate limit's retry-after), 0 when it did not say; a
	// driver that retries the run itself (package scaleout) honours it.
	RetryAfter time.Duration
}

// Error renders "CODE: message (file:line:col#/pointer): cause; hint: ...".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if loc := e.Location(); loc != "" {
		b.WriteString(" (")
		b.WriteString(loc)
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Hint != "" {
		b.WriteString("; hint: ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Location renders the file position of the error, or "" when it has none.
func (e *Error) Location() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	if e.Pointer != "" {
		b.WriteString("#")
		b.WriteString(e.Pointer)
	}
	return b.String()
}

// Unwrap returns the wrapped cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// New returns an error with the given code, layer and recoverability.
func New(code string, layer Layer, recoverable bool, format string, args ...any) *Error {
	return &Error{Code: code, Layer: layer, Recoverable: recoverable, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with the given code and layer wrapping cause.
func Wrap(cause error, code string, layer Layer, recoverable bool, format string, args ...any) *Error {
	e := New(code, layer, recoverable, format, args...)
	e.Err = cause
	return e
}

// From returns the first *Error in err's chain, or nil.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// IsRecoverable reports whether err's first *Error is marked recoverable.
// Errors that are not *Error are treated as not recoverable.
func IsRecoverable(err error) bool {
	e := From(err)
	return e != nil && e.Recoverable
}

// CodeOf returns the code of err's first *Error, or "" when there is none.
func CodeOf(err error) string {
	if e := From(err); e != nil {
		return e.Code
	}
	return ""
}

// sentinel builds a code-only *Error used as an errors.Is target.
func sentinel(code string, layer Layer, recoverable bool) *Error {
	return &Error{Code: code, Layer: layer, Recoverable: recoverable}
}

// Sentinels for errors.Is. Each names one kind of error by its code.
// Create real errors with New or Wrap and the matching Code* constant.
var (
	ErrConfigurationNotFound   = sentinel(CodeConfigurationNotFound, LayerConfiguration, false)
	ErrConfigurationParse      = sentinel(CodeConfigurationParse, LayerConfiguration, false)
	ErrConfigurationValidation = sentinel(CodeConfigurationValidation, LayerConfiguration, false)
	ErrDependencyResolution    = sentinel(CodeDependencyResolution, LayerLifecycle, false)
	ErrAlreadyStarted          = sentinel(CodeAlreadyStarted, LayerLifecycle, false)
	ErrNotStarted              = sentinel(CodeNotStarted, LayerLifecycle, false)
	ErrAlreadyStopped          = sentinel(CodeAlreadyStopped, LayerLifecycle, false)
	ErrHardLimit               = sentinel(CodeHardLimit, LayerLoop, false)
	ErrStepLoopLimit           = sentinel(CodeStepLoopLimit, LayerLoop, false)
	ErrTimeBudget              = sentinel(CodeTimeBudget, LayerLoop, false)
	ErrCanceled                = sentinel(CodeCanceled, LayerLoop, false)
	ErrSdkConnection           = sentinel(CodeSdkConnection, LayerSDKBridge, true)
	ErrSdkRateLimit            = sentinel(CodeSdkRateLimit, LayerSDKBridge, true)
	ErrSdkSessionNotFound      = sentinel(CodeSdkSessionNotFound, LayerSDKBridge, true)
	ErrSdkAuth                 = sentinel(CodeSdkAuth, LayerSDKBridge, false)
	ErrSdkRequest              = sentinel(CodeSdkRequest, LayerSDKBridge, false)
	ErrUnknownProvider         = sentinel(CodeUnknownProvider, LayerSDKBridge, false)
	ErrScriptExhausted         = sentinel(CodeScriptExhausted, LayerSDKBridge, false)
	ErrMaxTurns                = sentinel(CodeMaxTurns, LayerSDKBridge, true)
	ErrCompletion              = sentinel(CodeCompletion, LayerCompletion, false)
	ErrValidationExhausted     = sentinel(CodeValidationExhausted, LayerCompletion, false)
	ErrPromptNotFound          = sentinel(CodePromptNotFound, LayerPrompt, false)
	ErrPromptParse             = sentinel(CodePromptParse, LayerPrompt, false)
	ErrToolDenied              = sentinel(CodeToolDenied, LayerTool, true)
	ErrToolInput               = sentinel(CodeToolInput, LayerTool, true)
	ErrPathEscape              = sentinel(CodePathEscape, LayerTool, true)
	ErrSandboxUnavailable      = sentinel(CodeSandboxUnavailable, LayerSandbox, false)
	ErrBudgetExceeded          = sentinel(CodeBudgetExceeded, LayerLoop, false)
	ErrAborted                 = sentinel(CodeAborted, LayerLoop, false)
	ErrParamMissing            = sentinel(CodeParamMissing, LayerConfiguration, false)
	ErrParamInvalid            = sentinel(CodeParamInvalid, LayerConfiguration, false)
	ErrParamUnknown            = sentinel(CodeParamUnknown, LayerConfiguration, false)
	ErrValidator               = sentinel(CodeValidator, LayerCompletion, false)
	ErrValidationAborted       = sentinel(CodeValidationAborted, LayerCompletion, false)
	ErrExternalState           = sentinel(CodeExternalState, LayerCompletion, true)
	ErrStepRetryExhausted      = sentinel(CodeStepRetryExhausted, LayerStep, false)
	ErrStepAborted             = sentinel(CodeStepAborted, LayerStep, false)
	ErrStepFlowEnded           = sentinel(CodeStepFlowEnded, LayerStep, false)
	ErrEscalation              = sentinel(CodeEscalation, LayerStep, false)
	ErrStepJudge               = sentinel(CodeStepJudge, LayerStep, true)
	ErrStepIntent              = sentinel(CodeStepIntent, LayerStep, false)
	ErrStepRoute               = sentinel(CodeStepRoute, LayerStep, false)
	ErrSchemaResolution        = sentinel(CodeSchemaResolution, LayerCompletion, false)
	ErrSchemaValidation        = sentinel(CodeSchemaValidation, LayerCompletion, true)
	ErrSandboxSetup            = sentinel(CodeSandboxSetup, LayerSandbox, false)
	ErrSkillNotFound           = sentinel(CodeSkillNotFound, LayerSkill, false)
	ErrSkillParse              = sentinel(CodeSkillParse, LayerSkill, false)
	ErrSkillMissingReference   = sentinel(CodeSkillMissingReference, LayerSkill, true)
	ErrSkillValidation         = sentinel(CodeSkillValidation, LayerSkill, true)
	ErrSkillRepeatedFailure    = sentinel(CodeSkillRepeatedFailure, LayerSkill, true)
)

// Stable error codes. They appear in CLI output, --json results and journals;
// never change the meaning of an existing code.
const (
	CodeConfigurationNotFound   = "CONFIG_NOT_FOUND"
	CodeConfigurationParse      = "CONFIG_PARSE"
	CodeConfigurationValidation = "CONFIG_INVALID"
	CodeDependencyResolution    = "DEPENDENCY_RESOLUTION"
	CodeAlreadyStarted          = "ALREADY_STARTED"
	CodeNotStarted              = "NOT_STARTED"
	CodeAlreadyStopped          = "ALREADY_STOPPED"
	CodeHardLimit               = "HARD_LIMIT"
	CodeStepLoopLimit           = "STEP_LOOP_LIMIT"
	CodeTimeBudget              = "TIME_BUDGET"
	CodeCanceled                = "CANCELED"
	CodeSdkConnection           = "SDK_CONNECTION"
	CodeSdkRateLimit            = "SDK_RATE_LIMIT"
	CodeSdkSessionNotFound      = "SDK_SESSION_NOT_FOUND"
	CodeSdkAuth                 = "SDK_AUTH"
	CodeSdkRequest              = "SDK_REQUEST"
	CodeUnknownProvider         = "UNKNOWN_PROVIDER"
	CodeScriptExhausted         = "SCRIPT_EXHAUSTED"
	CodeMaxTurns                = "MAX_TURNS"
	CodeCompletion              = "COMPLETION"
	CodeValidationExhausted     = "VALIDATION_EXHAUSTED"
	CodePromptNotFound          = "PROMPT_NOT_FOUND"
	CodePromptParse             = "PROMPT_PARSE"
	CodeToolDenied              = "TOOL_DENIED"
	CodeToolInput               = "TOOL_INPUT"
	CodePathEscape              = "PATH_ESCAPE"
	CodeSandboxUnavailable      = "SANDBOX_UNAVAILABLE"
	// CodeKeyInAncestor: a run whose tools are not sandboxed was started
	// by a process whose environment holds a provider key, which those
	// tools could read from /proc/<pid>/environ.
	CodeKeyInAncestor  = "KEY_IN_ANCESTOR"
	CodeBudgetExceeded = "BUDGET_EXCEEDED"
	// CodeContextOverflow: a request would not fit in the model's context
	// window (and compaction is off or could not make it fit); nothing was
	// sent.
	CodeContextOverflow = "CONTEXT_OVERFLOW"
	// CodeAborted: the flow ended the run without completion and without a
	// more specific error.
	CodeAborted = "ABORTED"
	// CodeUsage: a command was given wrong arguments or flags (exit 2).
	CodeUsage = "USAGE"
	// CodeRunNotFound: no run has the id a command was given, nor starts
	// with it.
	CodeRunNotFound = "RUN_NOT_FOUND"
	// CodeRunAmbiguous: the id a command was given starts more than one
	// run's id.
	CodeRunAmbiguous = "RUN_AMBIGUOUS"
	// Parameter values given to a run (usage errors, exit 2).
	CodeParamMissing = "PARAM_MISSING" // a required parameter's flag was not given
	CodeParamInvalid = "PARAM_INVALID" // a value fails its type or validation
	CodeParamUnknown = "PARAM_UNKNOWN" // a value for a parameter the agent does not declare
	// CodeValidator: a completion validator could not run (unknown
	// validator or extractor, command could not start, bad path).
	CodeValidator = "VALIDATOR_ERROR"
	// CodeValidationAborted: completion conditions failed and the step's
	// onFailure action is "abort".
	CodeValidationAborted = "VALIDATION_ABORTED"
	// CodeExternalState: an external state query (gh) failed.
	CodeExternalState = "EXTERNAL_STATE"
	// CodeStepRetryExhausted: a step asked for more retries than its
	// retry policy allows and onExhausted is "error".
	CodeStepRetryExhausted = "STEP_RETRY_EXHAUSTED"
	// CodeStepAborted: an escalation with returnFlow "abort" ended the run.
	CodeStepAborted = "STEP_ABORTED"
	// CodeStepFlowEnded: a transition was asked of a step machine whose
	// flow already completed.
	CodeStepFlowEnded = "STEP_FLOW_ENDED"
	// CodeEscalation: an escalation notification (webhook) failed.
	CodeEscalation = "ESCALATION_FAILED"
	// CodeStepJudge: a prompt-type step check could not get a verdict.
	CodeStepJudge = "STEP_JUDGE"
	// CodeStepIntent: a step routed by its structuredGate gave no intent
	// it allows (and failFast is on).
	CodeStepIntent = "STEP_INTENT"
	// CodeStepRoute: an intent has nowhere to go (a jump to an unknown
	// step, closing from a step that is not a closure step, a transition
	// that the registry does not define).
	CodeStepRoute = "STEP_ROUTE"
	// CodeStepSubprocess: a subprocess step's command failed (non-zero
	// exit status, timeout) where its success would have completed the
	// run. Recoverable: resume runs the step again.
	CodeStepSubprocess = "STEP_SUBPROCESS"
	// CodeSchemaResolution: a structured-output schema cannot be resolved
	// into one self-contained schema (missing file or name, dangling or
	// cyclic $ref, conflicting allOf, path outside the schema directory) or
	// cannot be compiled.
	CodeSchemaResolution = "SCHEMA_RESOLUTION"
	// CodeSchemaValidation: a value (a model's structured output) does not
	// satisfy its schema. Recoverable: a retry prompt listing the problems
	// may fix it.
	CodeSchemaValidation = "SCHEMA_VALIDATION"
	// CodeSandboxSetup: the sandbox helper could not be prepared or started.
	CodeSandboxSetup = "SANDBOX_SETUP"
	// CodeSkillNotFound: no skill with that id or name, or no SKILL.md.
	CodeSkillNotFound = "SKILL_NOT_FOUND"
	// CodeSkillParse: a SKILL.md has no frontmatter, unparseable YAML or no
	// description.
	CodeSkillParse = "SKILL_PARSE"
	// CodeSkillMissingReference: SKILL.md refers to a file the skill does
	// not contain.
	CodeSkillMissingReference = "SKILL_MISSING_REFERENCE"
	// CodeSkillValidation: an expected output of a skill run is missing or
	// invalid.
	CodeSkillValidation = "SKILL_VALIDATION"
	// CodeSkillRepeatedFailure: the AttemptMemo refused to repeat a failed
	// action, or the script retry is used up.
	CodeSkillRepeatedFailure = "SKILL_REPEATED_FAILURE"
)
