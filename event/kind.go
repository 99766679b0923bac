package event

import (
	"encoding/json"

	"github.com/capstan-dev/capstan/journal"
)

// Kind says what an event is. Its value is the event's "type" in the run
// journal (docs/journal.md). Consumers must ignore kinds they do not
// know: new kinds are added over time.
type Kind string

// The kinds of a run's events. Each payload type has one of them
// (Payload.EventKind); the journal's spelling of each is the journal
// package's constant of the same name.
const (
	KindRunStart         Kind = journal.RunStart
	KindRunEnd           Kind = journal.RunEnd
	KindIterationStart   Kind = journal.IterationStart
	KindIterationEnd     Kind = journal.IterationEnd
	KindPromptResolved   Kind = journal.PromptResolved
	KindQueryStart       Kind = journal.QueryStart
	KindQueryResult      Kind = journal.QueryResult
	KindModelTurn        Kind = journal.ModelTurn
	KindModelUsage       Kind = journal.ModelUsage
	KindModelRetry       Kind = journal.ModelRetry
	KindSessionMessages  Kind = journal.SessionMessages
	KindContextCompacted Kind = journal.ContextCompacted
	KindToolCall         Kind = journal.ToolCall
	KindToolDenied       Kind = journal.ToolDenied
	KindToolIntent       Kind = journal.ToolIntent
	KindValidatorResult  Kind = journal.ValidatorResult
	KindRetryPrompt      Kind = journal.RetryPrompt
	KindStepTransition   Kind = journal.StepTransition
	KindCompletionCheck  Kind = journal.CompletionCheck
	KindWarning          Kind = journal.Warning
	KindError            Kind = journal.Error
	KindLifecycle        Kind = journal.LifecycleChange
	KindEscalation       Kind = journal.EscalationNotice
	KindGitHubCall       Kind = journal.GitHubCall // GitHubCallEvent
	KindAgentRun         Kind = journal.AgentRun   // AgentRunEvent

	KindStepState       Kind = "step.state"       // StepStateEvent
	KindProtectBaseline Kind = "protect.baseline" // ProtectBaseline
	KindTestBaseline    Kind = "tests.baseline"   // TestBaselineEvent
	KindTestCompare     Kind = "tests.compare"    // TestCompareEvent
	KindHiddenTests     Kind = "tests.hidden"     // event.HiddenResult

	KindTestChangeRequested Kind = "testchange.requested" // TestChangeRequest
	KindTestChangeDecided   Kind = "testchange.decided"   // TestChangeDecision
	KindCleanRun            Kind = "verify.clean"         // CleanRunEvent

	KindSkillActStart    Kind = "skill.act.start"      // skill.ActStartEvent
	KindSkillEvidence    Kind = "skill.evidence"       // SkillEvidence
	KindSkillReflect     Kind = "skill.reflect"        // SkillReflectEvent
	KindSkillActEnd      Kind = "skill.act.end"        // skill.ActResult
	KindSkillActUpToDate Kind = "skill.act.up_to_date" // SkillActUpToDateEvent

	KindPipelineStage     Kind = "pipeline.stage"     // PipelineStageEvent
	KindPipelineViolation Kind = "pipeline.violation" // PipelineViolation

	KindClaudeCodeProcess Kind = "claude_code.process" // ClaudeCodeProcessEvent

	// The model-output kinds: the model's work while a query runs,
	// delivered only to a ModelOutputConsumer and never journaled (the
	// journal has the finished turns).
	KindTextDelta     Kind = "model.text"       // TextDeltaEvent
	KindTextDiscarded Kind = "model.discarded"  // TextDiscardedEvent
	KindToolStart     Kind = "model.tool.start" // ToolStartEvent
	KindToolEnd       Kind = "model.tool.end"   // ToolEndEvent

	// The activity kinds: work that takes time outside the model,
	// delivered only to an ActivityConsumer and never journaled (the
	// journal has each one's result).
	KindActivityStart Kind = journal.ActivityStart // ActivityStartEvent
	KindActivityEnd   Kind = journal.ActivityEnd   // ActivityEndEvent
)

// Payload is what an event carries. Each payload type has one kind (or,
// for ToolUse, one of two by its Denied field; for Raw, the kind it was
// read with), so an event of the wrong kind for its payload cannot be
// written.
type Payload interface {
	EventKind() Kind
}

// Emitter receives a run's events: a Stream, a journal (Journal), the
// OpenTelemetry tracer, a test's recorder. The payload is never nil.
type Emitter interface {
	Emit(Payload)
}

// Discard is an Emitter that drops every event.
var Discard Emitter = discard{}

type discard struct{}

func (discard) Emit(Payload) {}

// Raw is an event already encoded: one read back from a journal (a
// Temporal worker's run, replayed into the local journal). It is
// re-encoded as it was.
type Raw struct {
	Kind Kind
	Data json.RawMessage
}

// EventKind implements Payload.
func (r Raw) EventKind() Kind { return r.Kind }

// MarshalJSON returns the encoded payload as it was read.
func (r Raw) MarshalJSON() ([]byte, error) {
	if len(r.Data) == 0 {
		return []byte("null"), nil
	}
	return r.Data, nil
}

// Positioner is implemented by payloads that move the run's position:
// the event carrying it and every later one are stamped with it.
type Positioner interface {
	Position() (iteration int, step string)
}
