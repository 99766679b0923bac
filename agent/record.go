package agent

import (
	"encoding/json"
	"fmt"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/verify"
)

// RunRecord is one run as reconstructed from its journal. It is what
// `capstan show` prints and what `capstan resume` continues from.
type RunRecord struct {
	ID         string                     `json:"runId"`
	Journal    string                     `json:"journal"`
	Start      *RunStartEvent             `json:"start,omitempty"`
	Iterations []IterationRecord          `json:"iterations"`
	Result     *event.RunResult           `json:"result,omitempty"`
	Warnings   []string                   `json:"warnings,omitempty"`
	Errors     []event.ErrorEvent         `json:"errors,omitempty"`
	Sessions   map[string][]event.Message `json:"-"`
	// Ended is false when the journal has no run.end event: the run was
	// killed or is still running.
	Ended bool `json:"ended"`
	// Definitions are the definition records of the run's run.start events
	// that have one, in order: the first is the definition the run started
	// with, the last the one it used most recently (a resume may reload).
	Definitions []*agentdir.SnapshotRecord `json:"definitions,omitempty"`
	// Integrity is what reading the journal found: a torn last line,
	// damaged lines, breaks in the hash chain.
	Integrity journal.Integrity `json:"integrity"`
	// UnrecordedUsage is the usage of model turns and compaction summary
	// requests in iterations that never ended (killed): billed, but in no
	// iteration summary. Resume counts
	// it in the run's usage and budgets.
	UnrecordedUsage event.Usage `json:"unrecordedUsage,omitzero"`
	// UnreportedResponses counts the responses of those iterations that
	// were billed without a usage report: cut by a kill while they
	// streamed, before their provider reported their usage (a model.usage
	// marked unreported with no model.turn after it: OpenAI-compatible
	// servers report usage in a stream's last chunk), or dropped that way
	// and retried (model.turn unreported_attempts); with those of the
	// finished iterations a rewind dropped. Their tokens are in no figure:
	// UnrecordedUsage, and a resumed run's usage, are lower bounds.
	UnreportedResponses int `json:"unreportedResponses,omitempty"`
	// ProtectBaseline is the run's first protect.baseline: the protected
	// files as they were when the run started (nil when none are).
	ProtectBaseline *event.ProtectBaseline `json:"protectBaseline,omitempty"`
	// StepBaseline is the last step baseline (protect.baseline with a
	// step), kept for resume.
	StepBaseline *event.ProtectBaseline `json:"stepBaseline,omitempty"`
	// TestBaselines are the test validators' runs before the first
	// iteration (tests.baseline), by validator: what no-lost-tests
	// compares with, kept for resume.
	TestBaselines map[string]*event.TestBaseline `json:"testBaselines,omitempty"`
	// HiddenBaselines are the test validators' runs with the hidden test
	// files placed, before the first iteration (tests.hidden of phase
	// baseline), by validator: the hidden tests, kept for resume.
	HiddenBaselines map[string]*event.HiddenResult `json:"hiddenBaselines,omitempty"`
	// TestChange is the run's latest request to change protected files
	// and its decision (nil when it made none). An approved decision is
	// already applied to ProtectBaseline and StepBaseline.
	TestChange *TestChangeRecord `json:"testChange,omitempty"`
	// Temporal is where the run lives when a Temporal worker ran it (the
	// last run.start that says so); nil for a local run.
	Temporal *TemporalRun `json:"temporal,omitempty"`
	// GitHubRepo is the repository the run's first run.start pinned for
	// capstan's own gh calls; resume keeps it.
	GitHubRepo *github.Repo `json:"githubRepo,omitempty"`
	// stepState is the step machine's state after the last finished
	// iteration (for resume).
	stepState *event.StepStateEvent
	// events are the journal's events (for Rewind).
	events []journal.Event
	// rewound is set by Rewind: the resumed run's run.start says so.
	rewound bool
	// unrecordedByModel is UnrecordedUsage of the iterations that never
	// ended by the model that was billed for it (query.start's model, ""
	// for the run's), so that resume prices it at that model's price.
	unrecordedByModel map[string]event.Usage
	// rewoundCostUSD is the cost the summaries of the finished iterations
	// a rewind dropped had (their usage is in UnrecordedUsage too).
	rewoundCostUSD float64
}

// IterationRecord is one iteration of a RunRecord.
type IterationRecord struct {
	Iteration    int                     `json:"iteration"`
	Step         string                  `json:"step,omitempty"`
	PromptSource string                  `json:"promptSource,omitempty"`
	Prompt       string                  `json:"prompt,omitempty"`
	Query        *event.QueryResult      `json:"query,omitempty"`
	Denied       []event.ToolUse         `json:"denied,omitempty"`
	Events       []journal.Event         `json:"events,omitempty"` // validator, retry, step, completion events
	Outcome      *event.OutcomeEvent     `json:"outcome,omitempty"`
	Summary      *event.IterationSummary `json:"summary,omitempty"`
	Errors       []event.ErrorEvent      `json:"errors,omitempty"`
	// Finished is false for an iteration cut short (killed run).
	Finished bool `json:"finished"`
	// stepState is the step machine's state after this iteration.
	stepState *event.StepStateEvent
}

// LoadRun reads a run journal into a RunRecord. It tolerates a journal cut
// short by a killed process.
func LoadRun(id, path string) (*RunRecord, error) {
	events, integrity, err := journal.ReadChecked(path)
	if err != nil {
		return nil, err
	}
	r := &runReader{path: path, rec: &RunRecord{ID: id, Journal: path, Sessions: llm.TranscriptsFromEvents(committedMessages(events, -1)),
		Integrity: integrity, events: events}}
	for _, ev := range events {
		if err := r.read(ev); err != nil {
			return nil, err
		}
	}
	r.settlePending()
	return r.rec, nil
}

// runReader rebuilds a RunRecord from its journal's events, read in order.
type runReader struct {
	rec  *RunRecord
	path string
	// cur is the iteration the events being read belong to (nil after a
	// run.start or before an iteration.start).
	cur *IterationRecord
	// tentative is the step state journaled in the iteration under way,
	// committed when that iteration ends finished.
	tentative *event.StepStateEvent
	// pending is the usage of the model turns of the iteration attempt
	// under way: in its summary when it ends, unrecorded when it never does.
	pending event.Usage
	// inFlight is the usage of a response that began streaming and has no
	// model.turn yet (model.usage): a kill that cut it leaves it billed.
	// inFlightUnreported says that its provider had not reported the
	// response's own usage yet (inFlight misses it).
	inFlight           event.Usage
	inFlightUnreported bool
	// pendingUnreported counts the attempt's responses billed without a
	// usage report (model.turn unreported_attempts).
	pendingUnreported int
	// model is the model the attempt under way queries (query.start's;
	// "" for the run's model), the one its pending usage was billed by.
	model string
}

// read folds one event into the record.
func (r *runReader) read(ev journal.Event) error {
	switch ev.Type {
	case journal.ModelTurn, journal.ModelUsage, journal.ContextCompacted:
		r.billed(ev)
	case journal.QueryStart:
		var q event.QueryStartEvent
		if err := r.decode(ev, &q); err != nil {
			return err
		}
		r.model = q.Model
	case journal.RunStart:
		return r.runStart(ev)
	case journal.RunEnd:
		var res event.RunResult
		if err := r.decode(ev, &res); err != nil {
			return err
		}
		r.rec.Result, r.rec.Ended = &res, true
	case journal.IterationStart:
		r.settlePending()
		r.cur = nil
		r.at(ev.Iteration)
		r.rec.TestChange.markDelivered()
	case journal.PromptResolved, journal.QueryResult, journal.ToolDenied:
		return r.iterationInput(ev)
	case journal.IterationEnd:
		return r.iterationEnd(ev)
	case journal.Error, journal.Warning:
		return r.problem(ev)
	case string(event.KindProtectBaseline), string(event.KindTestBaseline), string(event.KindHiddenTests):
		return r.baseline(ev)
	case string(event.KindTestChangeRequested), string(event.KindTestChangeDecided):
		return r.testChange(ev)
	case string(event.KindStepState):
		var st event.StepStateEvent
		if err := r.decode(ev, &st); err != nil {
			return err
		}
		r.tentative = &st // format 1: committed when the iteration ends
	case journal.ValidatorResult, journal.RetryPrompt, journal.StepTransition, journal.CompletionCheck, journal.EscalationNotice, string(event.KindTestCompare), string(event.KindCleanRun):
		r.keep(ev)
	}
	return nil
}

// decode reads ev's payload into v (nothing when it has none).
func (r *runReader) decode(ev journal.Event, v any) error {
	if len(ev.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(ev.Data, v); err != nil {
		return fmt.Errorf("journal %s: event %d (%s): %w", r.path, ev.Seq, ev.Type, err)
	}
	return nil
}

// at is the record of iteration n, started when the events move to it.
func (r *runReader) at(n int) *IterationRecord {
	rec := r.rec
	if r.cur == nil || r.cur.Iteration != n {
		// A resumed run repeats an unfinished iteration number: replace it.
		if k := len(rec.Iterations); k > 0 && rec.Iterations[k-1].Iteration == n && !rec.Iterations[k-1].Finished {
			rec.Iterations = rec.Iterations[:k-1]
		}
		rec.Iterations = append(rec.Iterations, IterationRecord{Iteration: n})
		r.cur = &rec.Iterations[len(rec.Iterations)-1]
	}
	return r.cur
}

// keep adds an event of an iteration to that iteration's events.
func (r *runReader) keep(ev journal.Event) {
	if ev.Iteration > 0 {
		it := r.at(ev.Iteration)
		it.Events = append(it.Events, ev)
	}
}

// settlePending counts the billed usage of an iteration attempt that did
// not end (its response cut in flight included) as unrecorded: a new
// attempt or run starts, or the journal ends.
func (r *runReader) settlePending() {
	r.pending.Add(r.inFlight)
	r.rec.UnrecordedUsage.Add(r.pending)
	if r.pending != (event.Usage{}) {
		if r.rec.unrecordedByModel == nil {
			r.rec.unrecordedByModel = map[string]event.Usage{}
		}
		u := r.rec.unrecordedByModel[r.model]
		u.Add(r.pending)
		r.rec.unrecordedByModel[r.model] = u
	}
	if r.inFlightUnreported {
		r.rec.UnreportedResponses++
	}
	r.rec.UnreportedResponses += r.pendingUnreported
	r.pending, r.inFlight, r.inFlightUnreported, r.pendingUnreported, r.model = event.Usage{}, event.Usage{}, false, 0, ""
}

// billed adds a model turn's usage, or a compaction's, to the attempt
// under way, and notes the usage of a response still streaming
// (model.usage); a compaction is also kept with its iteration.
func (r *runReader) billed(ev journal.Event) {
	switch ev.Type {
	case journal.ModelTurn:
		var mt event.ModelTurnEvent
		if ev.Iteration > 0 && r.decode(ev, &mt) == nil {
			r.pending.Add(mt.Usage)
			r.pendingUnreported += mt.UnreportedAttempts
		}
		r.inFlight, r.inFlightUnreported = event.Usage{}, false // in the turn's usage
		return
	case journal.ModelUsage:
		var mu event.ModelUsageEvent
		if ev.Iteration > 0 && r.decode(ev, &mu) == nil {
			r.inFlight, r.inFlightUnreported = mu.Usage, mu.Unreported
		}
		return
	}
	if ev.Iteration <= 0 {
		return
	}
	// The summary request of a compaction was billed like a turn (the
	// query's usage, so the summary, counts it).
	var c event.CompactionEvent
	if r.decode(ev, &c) == nil {
		r.pending.Add(c.Usage)
	}
	r.keep(ev)
}

// runStart reads a run.start: the run's first one says how it started,
// each later one a resume (which may have rewound the run).
func (r *runReader) runStart(ev journal.Event) error {
	rec := r.rec
	r.settlePending()
	var s RunStartEvent
	if err := r.decode(ev, &s); err != nil {
		return err
	}
	if rec.Start == nil {
		rec.Start = &s
	}
	if rec.GitHubRepo == nil {
		rec.GitHubRepo = s.GitHubRepo
	}
	if s.Temporal != nil {
		rec.Temporal = s.Temporal
	}
	if s.Definition != nil {
		rec.Definitions = append(rec.Definitions, s.Definition)
	}
	if s.Resumed && s.Rewound && s.Iteration < rec.FinishedIterations() {
		// The run continued from an earlier iteration than its last
		// finished one (a driver that redid an iteration whose work
		// was lost): the later ones no longer count.
		rec.rewind(s.Iteration)
	}
	r.cur = nil
	rec.Ended, rec.Result = false, nil
	rec.TestChange.markDelivered()
	return nil
}

// iterationInput reads what an iteration sent and got: its prompt, its
// query's result, the tool calls capstan denied.
func (r *runReader) iterationInput(ev journal.Event) error {
	switch ev.Type {
	case journal.PromptResolved:
		var p event.PromptEvent
		if err := r.decode(ev, &p); err != nil {
			return err
		}
		it := r.at(ev.Iteration)
		it.Prompt, it.PromptSource, it.Step = p.Text, p.Source, ev.Step
	case journal.QueryResult:
		var q event.QueryResult
		if err := r.decode(ev, &q); err != nil {
			return err
		}
		r.at(ev.Iteration).Query = &q
	case journal.ToolDenied:
		var u event.ToolUse
		if err := r.decode(ev, &u); err != nil {
			return err
		}
		if ev.Iteration > 0 {
			it := r.at(ev.Iteration)
			it.Denied = append(it.Denied, u)
		}
	}
	return nil
}

// iterationEnd reads an iteration's verdict. An iteration whose query did
// not finish is not counted, and resume runs it again under its number;
// its billed turns stay pending like a killed iteration's.
func (r *runReader) iterationEnd(ev journal.Event) error {
	var e event.IterationEvent
	if err := r.decode(ev, &e); err != nil {
		return err
	}
	it := r.at(ev.Iteration)
	it.Outcome, it.Summary, it.Finished = &e.Outcome, e.Summary, !e.Outcome.Redo
	if e.StepState != nil {
		r.tentative = e.StepState // format 2: the state travels with the end
	}
	if it.Finished {
		r.pending, r.inFlight, r.inFlightUnreported, r.pendingUnreported = event.Usage{}, event.Usage{}, false, 0 // in the summary
	}
	if r.tentative != nil && it.Finished {
		r.rec.stepState, it.stepState, r.tentative = r.tentative, r.tentative, nil
	}
	return nil
}

// problem reads an error (the run's or an iteration's) or a warning.
func (r *runReader) problem(ev journal.Event) error {
	if ev.Type == journal.Warning {
		var w struct {
			Message string `json:"message"`
		}
		_ = r.decode(ev, &w)
		r.rec.Warnings = append(r.rec.Warnings, w.Message)
		return nil
	}
	var e event.ErrorEvent
	if err := r.decode(ev, &e); err != nil {
		return err
	}
	if ev.Iteration > 0 {
		it := r.at(ev.Iteration)
		it.Errors = append(it.Errors, e)
	} else {
		r.rec.Errors = append(r.rec.Errors, e)
	}
	return nil
}

// baseline reads what the run compares with: the protected files (the
// first, and each step's), the test validators' first runs, and the
// hidden tests' baselines (their later runs are kept with the iteration).
func (r *runReader) baseline(ev journal.Event) error {
	rec := r.rec
	switch ev.Type {
	case string(event.KindProtectBaseline):
		var b event.ProtectBaseline
		if err := r.decode(ev, &b); err != nil {
			return err
		}
		switch {
		case b.Step != "":
			rec.StepBaseline = &b
		case rec.ProtectBaseline == nil:
			rec.ProtectBaseline = &b
		}
	case string(event.KindTestBaseline):
		var b event.TestBaseline
		if err := r.decode(ev, &b); err != nil {
			return err
		}
		if rec.TestBaselines == nil {
			rec.TestBaselines = map[string]*event.TestBaseline{}
		}
		if rec.TestBaselines[b.Validator] == nil {
			rec.TestBaselines[b.Validator] = &b
		}
	case string(event.KindHiddenTests):
		var h event.HiddenResult
		if err := r.decode(ev, &h); err != nil {
			return err
		}
		if h.Phase == event.HiddenPhaseBaseline && ev.Iteration == 0 {
			if rec.HiddenBaselines == nil {
				rec.HiddenBaselines = map[string]*event.HiddenResult{}
			}
			if rec.HiddenBaselines[h.Validator] == nil {
				rec.HiddenBaselines[h.Validator] = &h
			}
		} else {
			r.keep(ev)
		}
	}
	return nil
}

// testChange reads a request to change protected files and its decision;
// an approval applies to the protected files' baselines.
func (r *runReader) testChange(ev journal.Event) error {
	rec := r.rec
	if ev.Type == string(event.KindTestChangeRequested) {
		var req event.TestChangeRequest
		if err := r.decode(ev, &req); err != nil {
			return err
		}
		rec.TestChange = &TestChangeRecord{Request: &req}
		return nil
	}
	var d event.TestChangeDecision
	if err := r.decode(ev, &d); err != nil {
		return err
	}
	if t := rec.TestChange; t.Pending() && t.Request.Iteration == d.Iteration {
		// Only the files of the request, whatever the decision lists.
		d.Files = t.Request.Files
		t.Decision = &d
		if d.Decision == verify.TestChangeApproved {
			verify.AcceptChanges(rec.ProtectBaseline, d.Files)
			verify.AcceptChanges(rec.StepBaseline, d.Files)
		}
	}
	return nil
}

// Rewind drops the iterations after the k-th finished one, as a resume
// that continues from iteration k does: their summaries, step state and
// session messages no longer count, and the usage their model turns were
// billed for becomes unrecorded usage. A run driver that redoes an
// iteration whose work was lost (package scaleout) rewinds the record
// before resuming it; the resumed run's run.start records k, so that
// reading the journal again rewinds it the same way.
func (r *RunRecord) Rewind(k int) {
	r.rewind(k)
	r.rewound = true
	if r.events != nil {
		r.Sessions = llm.TranscriptsFromEvents(committedMessages(r.events, k))
	}
}

// rewind is Rewind without the sessions (LoadRun's committedMessages
// applies the rewinds the journal records).
func (r *RunRecord) rewind(k int) {
	n, cut := 0, len(r.Iterations)
	for i, it := range r.Iterations {
		if it.Finished {
			n++
		}
		if n > k {
			cut = i
			break
		}
	}
	r.stepState = nil
	for _, it := range r.Iterations[cut:] {
		if it.Summary != nil && it.Finished {
			r.UnrecordedUsage.Add(it.Summary.Usage)
			r.rewoundCostUSD += it.Summary.CostUSD
			r.UnreportedResponses += it.Summary.UsageUnreported
		}
	}
	r.Iterations = r.Iterations[:cut]
	for i := len(r.Iterations) - 1; i >= 0; i-- {
		if r.Iterations[i].stepState != nil {
			r.stepState = r.Iterations[i].stepState
			break
		}
	}
	r.Result, r.Ended = nil, false
}

// Definition is the record of the definition the run used most recently
// (what resume continues with), or nil when the run recorded none.
func (r *RunRecord) Definition() *agentdir.SnapshotRecord {
	if len(r.Definitions) == 0 {
		return nil
	}
	return r.Definitions[len(r.Definitions)-1]
}

// committedMessages returns the session.messages events of iterations
// that reached iteration.end (and those outside any iteration), up to
// iteration upTo (-1 = all). An iteration killed after its query journaled
// its messages but before it ended runs again on resume, so its messages
// must not be in the session twice; neither must those of iterations a
// resume rewound (a resumed run.start with rewound set).
func committedMessages(events []journal.Event, upTo int) []journal.Event {
	var out, pending []journal.Event
	drop := func(k int) {
		kept := out[:0]
		for _, ev := range out {
			if ev.Iteration <= k {
				kept = append(kept, ev)
			}
		}
		out = kept
	}
	for _, ev := range events {
		switch {
		case ev.Type == journal.RunStart:
			pending = nil
			var s RunStartEvent
			if json.Unmarshal(ev.Data, &s) == nil && s.Resumed && s.Rewound {
				drop(s.Iteration)
			}
		case ev.Type == journal.IterationStart:
			pending = nil
		case ev.Type == journal.IterationEnd:
			out, pending = append(out, pending...), nil
		case ev.Type == journal.SessionMessages && ev.Iteration > 0:
			pending = append(pending, ev)
		case ev.Type == journal.SessionMessages:
			out = append(out, ev)
		}
	}
	if upTo >= 0 {
		drop(upTo)
	}
	return out
}

// FinishedIterations counts iterations that ran to their end.
func (r *RunRecord) FinishedIterations() int {
	n := 0
	for _, it := range r.Iterations {
		if it.Finished {
			n++
		}
	}
	return n
}
