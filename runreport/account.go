// Package runreport turns a run journal into a chronological account of
// what happened — per iteration: where the prompt came from, the model's
// text and tool calls in the order they happened with their durations, the
// verdict with each validator's result and failure pattern, the retry
// prompt, tokens and cost — and renders it as text, Markdown (for a pull
// request comment or a CI job summary) or one self-contained HTML page.
//
// It reads only the journal's events, so it shows agent runs, resumed runs,
// runs cut short by a killed process, skill runs and pipeline runs alike.
package runreport

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// Run is the account of one run.
type Run struct {
	ID       string    `json:"runId"`
	Agent    string    `json:"agent,omitempty"`
	AgentDir string    `json:"agentDir,omitempty"`
	WorkDir  string    `json:"workDir,omitempty"`
	Model    string    `json:"model,omitempty"`
	Params   any       `json:"params,omitempty"`
	Started  time.Time `json:"started"`
	// Sandbox says whether the run's commands ran in the sandbox:
	// "sandboxed", "unsandboxed (…why…)", or "" when the journal does not
	// say (recorded before capstan recorded it). A run resumed
	// unsandboxed even once is unsandboxed.
	Sandbox string `json:"sandbox,omitempty"`
	// Skill is the skill's id on a skill run ("" on an agent run); its
	// iterations are the model's turns.
	Skill      string      `json:"skill,omitempty"`
	Goal       string      `json:"goal,omitempty"`
	Iterations []Iteration `json:"iterations"`
	Warnings   []string    `json:"warnings,omitempty"`
	// TestBaselines are the test validators' runs before the first
	// iteration (tests.baseline), what no-lost-tests compares with.
	TestBaselines []event.TestBaseline `json:"testBaselines,omitempty"`
	// HiddenBaselines are the test validators' runs with the hidden test
	// files placed, before the first iteration (tests.hidden of phase
	// baseline): the hidden tests by name, never their contents.
	HiddenBaselines []event.HiddenResult `json:"hiddenBaselines,omitempty"`
	// Outcome is how the run ended; nil when the journal has no run.end
	// event (the run was killed or is still running).
	Outcome *Outcome `json:"outcome,omitempty"`
	// Artifacts are the files a skill run produced.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Pipeline is set on a pipeline run (`capstan pipeline run`): its
	// stages take the place of iterations.
	Pipeline *Pipeline `json:"pipeline,omitempty"`
	// PipelineRun is the id of the pipeline run an agent run is a stage
	// of ("" = none).
	PipelineRun string `json:"pipelineRun,omitempty"`
	// Unverified is set for a journal kept inside the work dir (by capstan
	// versions before the state directory), which the agent could write:
	// every format shows it under the Unverified banner, and its status
	// is never a plain COMPLETED.
	Unverified bool `json:"unverified,omitempty"`
}

// Unverified is the banner of a run recorded inside its work dir.
const Unverified = "unverified: recorded inside the work dir, which the agent can write"

// Iteration is one iteration of an agent run, or one model turn of a skill
// run.
type Iteration struct {
	N            int       `json:"iteration"`
	Step         string    `json:"step,omitempty"`
	Started      time.Time `json:"started"`
	Ended        time.Time `json:"ended,omitempty"`
	PromptSource string    `json:"promptSource,omitempty"`
	Prompt       string    `json:"prompt,omitempty"`
	Entries      []Entry   `json:"entries"`
	Verdict      *Verdict  `json:"verdict,omitempty"`
	// Usage holds every token count the journal recorded for the iteration
	// (input_tokens, output_tokens, cache_read_tokens, ...), keyed by the
	// journal's field names.
	Usage   map[string]int64 `json:"usage,omitempty"`
	CostUSD float64          `json:"costUsd"`
	// Finished is false for an iteration cut short.
	Finished bool `json:"finished"`
}

// Duration is how long the iteration took (0 when it did not finish).
func (it Iteration) Duration() time.Duration {
	if it.Ended.IsZero() {
		return 0
	}
	return it.Ended.Sub(it.Started)
}

// Tokens is the iteration's input plus output tokens.
func (it Iteration) Tokens() int64 {
	return it.Usage["input_tokens"] + it.Usage["output_tokens"]
}

// Entry kinds, in the order they can appear within an iteration.
const (
	KindText       = "text"        // the model's text of one turn
	KindTool       = "tool"        // a tool call with its input, output and duration
	KindDenied     = "denied"      // a tool call the permission policy refused
	KindModelRetry = "model-retry" // the provider retried a failed API call
	KindTransition = "transition"  // the step machine moved (or stayed)
	KindCheck      = "check"       // the completion check
	KindValidator  = "validator"   // one validator's result
	KindRetry      = "retry"       // the retry prompt chosen for a failure pattern
	KindError      = "error"
	KindWarning    = "warning"
	KindCompaction = "compaction" // the transcript was shortened to fit the context window
)

// Entry is one thing that happened, in journal order.
type Entry struct {
	Kind string    `json:"kind"`
	Time time.Time `json:"time"`
	// Title is one line: a tool's name and input, a validator's name, a
	// retry's pattern.
	Title string `json:"title"`
	// Detail is the longer text: the model's text, a tool's output, a
	// retry prompt.
	Detail   string        `json:"detail,omitempty"`
	Duration time.Duration `json:"durationNs,omitempty"`
	// OK is false for a failed tool call, validator or check.
	OK bool `json:"ok"`
	// Omitted is the number of bytes of a failed validator's output
	// before the end of it that Detail holds (and the journal keeps).
	Omitted int `json:"omittedBytes,omitempty"`
}

// Verdict is how an iteration was judged.
type Verdict struct {
	// Result is "complete", "continue" or "stop".
	Result     string            `json:"result"`
	Reason     string            `json:"reason,omitempty"`
	Validators []ValidatorResult `json:"validators,omitempty"`
	// Pattern is the failure pattern that chose the retry prompt.
	Pattern string `json:"pattern,omitempty"`
	// Retry is the prompt sent next because of the failure.
	Retry *Retry `json:"retry,omitempty"`
}

// ValidatorResult is one validator run.
type ValidatorResult struct {
	Name     string        `json:"validator"`
	Type     string        `json:"type,omitempty"`
	Valid    bool          `json:"valid"`
	Pattern  string        `json:"pattern,omitempty"`
	ExitCode *int          `json:"exitCode,omitempty"`
	Duration time.Duration `json:"durationNs,omitempty"`
	// Output is the end of a failed validator's output as the journal
	// keeps it, and OutputOmitted the number of bytes before it that it
	// does not (journals written before capstan kept it have neither).
	Output        string `json:"output,omitempty"`
	OutputOmitted int    `json:"outputOmitted,omitempty"`
}

// Retry is a retry prompt.
type Retry struct {
	Pattern     string `json:"pattern,omitempty"`
	Validator   string `json:"validator,omitempty"`
	Source      string `json:"source,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	MaxAttempts int    `json:"maxAttempts,omitempty"`
	Text        string `json:"text"`
	Params      string `json:"params,omitempty"`
}

// Outcome is how the run ended.
type Outcome struct {
	Success          bool             `json:"success"`
	CompletionReason string           `json:"completionReason,omitempty"`
	Reason           string           `json:"reason,omitempty"`
	Iterations       int              `json:"iterations"`
	Usage            map[string]int64 `json:"usage,omitempty"`
	// UsageUnreported counts the responses the run was billed for whose
	// tokens are in neither Usage nor CostUSD (event.RunResult's): see
	// UsageNote.
	UsageUnreported int           `json:"usageUnreported,omitempty"`
	CostUSD         float64       `json:"cost"`
	Duration        time.Duration `json:"durationNs"`
	// TestBaseline is the part of Duration spent taking the test
	// baselines before the first iteration (0 in journals of runs that
	// took none, or of capstan versions that did not count it).
	TestBaseline time.Duration `json:"testBaselineNs,omitempty"`
	ErrorCode    string        `json:"errorCode,omitempty"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
	Recoverable  bool          `json:"recoverable,omitempty"`
}

// UsageNote says what the outcome's usage and cost miss, "" when they
// miss nothing capstan knows of: the responses whose stream a kill or a
// dropped connection cut before their provider reported their usage.
func (o *Outcome) UsageNote() string {
	if o == nil || o.UsageUnreported <= 0 {
		return ""
	}
	what := "1 response"
	if o.UsageUnreported > 1 {
		what = fmt.Sprintf("%d responses", o.UsageUnreported)
	}
	return fmt.Sprintf("usage and cost are lower bounds: they miss the input and output tokens of %s cut while streaming (by a kill, or a dropped connection the request was retried after), before the provider reported its usage (it reports usage only at the end of a stream)", what)
}

// Artifact is a file a skill run wrote.
type Artifact struct {
	Handle string `json:"handle"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
}

// Load reads the journal at path into a Run.
func Load(id, path string) (*Run, error) {
	events, err := journal.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Build(id, events)
}

// Build makes the account of a run from its journal events.
func Build(id string, events []journal.Event) (*Run, error) {
	b := builder{run: &Run{ID: id, Iterations: []Iteration{}}}
	for _, ev := range events {
		if err := b.add(ev); err != nil {
			return nil, fmt.Errorf("journal event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	b.finish()
	return b.run, nil
}

type builder struct {
	run *Run
	cur *Iteration
	// turns counts the current iteration's model turns.
	turns int
	// texts of the current iteration from session.messages, one per
	// assistant message (haveTexts: the provider journals a transcript).
	texts     []string
	haveTexts bool
	responses []string // query.result responses, for providers without one
	// unreported is the entry for a response that began to stream before
	// its provider reported its usage (model.usage unreported), until the
	// usage or the turn is journaled; an iteration that ends with it
	// shows it.
	unreported *Entry
}

func (b *builder) iteration(n int, at time.Time) *Iteration {
	if b.cur != nil && b.cur.N == n {
		return b.cur
	}
	b.closeIteration()
	its := b.run.Iterations
	// A resumed run repeats an unfinished iteration: replace it.
	if k := len(its); k > 0 && its[k-1].N == n && !its[k-1].Finished {
		b.run.Iterations = its[:k-1]
	}
	b.run.Iterations = append(b.run.Iterations, Iteration{N: n, Started: at, Entries: []Entry{}})
	b.cur = &b.run.Iterations[len(b.run.Iterations)-1]
	b.turns, b.texts, b.haveTexts, b.responses = 0, nil, false, nil
	return b.cur
}

// rewind drops the iterations after the k-th finished one: a resumed run
// that continued from iteration k (a driver redid an iteration whose work
// was lost) no longer counts them, and the account shows what counted.
func (b *builder) rewind(k int) {
	n := 0
	for i, it := range b.run.Iterations {
		if it.Finished {
			n++
		}
		if n > k {
			dropped := b.run.Iterations[i:]
			which := fmt.Sprintf("iteration %d was", dropped[0].N)
			if last := dropped[len(dropped)-1].N; last != dropped[0].N {
				which = fmt.Sprintf("iterations %d to %d were", dropped[0].N, last)
			}
			b.run.Warnings = append(b.run.Warnings, which+" run again after the run continued from iteration "+fmt.Sprint(k)+
				"; the account shows the attempt that counted (the journal keeps both)")
			b.run.Iterations = b.run.Iterations[:i]
			return
		}
	}
}

// Placeholders (entries without a kind) mark where a model turn ended or
// the query's result arrived; closeIteration replaces them with the model's
// text, so each turn's text comes right before the tool calls it made.
const (
	placeTurn  = "turn"
	placeQuery = "query"
)

// closeIteration places the model's text into the current iteration: the
// transcript's assistant messages one per model turn, or, for a provider
// that journals no transcript, the query's responses where the query ended.
func (b *builder) closeIteration() {
	it := b.cur
	if it == nil {
		return
	}
	if b.unreported != nil {
		it.Entries = append(it.Entries, *b.unreported)
		b.unreported = nil
	}
	byTurn := b.haveTexts && b.turns > 0
	texts := b.responses
	if b.haveTexts {
		texts = b.texts
	}
	out := make([]Entry, 0, len(it.Entries)+len(texts))
	text := func(e Entry, t string) {
		if t != "" {
			out = append(out, Entry{Kind: KindText, Time: e.Time, Title: "model", Detail: t, OK: true})
		}
	}
	next := 0
	for _, e := range it.Entries {
		switch {
		case e.Kind != "":
			out = append(out, e)
		case e.Title == placeTurn && byTurn && next < len(texts):
			text(e, texts[next])
			next++
		case e.Title == placeQuery && !byTurn:
			for ; next < len(texts); next++ {
				text(e, texts[next])
			}
		}
	}
	for ; next < len(texts); next++ {
		text(Entry{Time: it.Ended}, texts[next])
	}
	it.Entries = out
	b.cur = nil
}

func (b *builder) entry(e Entry) { b.cur.Entries = append(b.cur.Entries, e) }

func (b *builder) add(ev journal.Event) error {
	decode := func(v any) error {
		if len(ev.Data) == 0 {
			return nil
		}
		return json.Unmarshal(ev.Data, v)
	}
	r := b.run
	switch ev.Type {
	case journal.RunStart:
		return b.onRunStart(ev, decode)
	case "skill.act.start":
		return b.onSkillStart(ev, decode)
	case journal.IterationStart:
		b.iteration(ev.Iteration, ev.Time)
		return nil
	case journal.RunEnd:
		return b.onRunEnd(ev, decode)
	case journal.Warning:
		return b.onWarning(ev, decode)
	case journal.GitHubCall:
		return b.onGitHubCall(ev, decode)
	case string(event.KindTestBaseline):
		return b.onTestBaseline(ev, decode)
	case string(event.KindHiddenTests):
		return b.onHiddenTests(ev, decode)
	case journal.LifecycleChange, journal.QueryStart:
		return nil
	}
	if ok, err := b.addPipeline(ev, decode); ok {
		return err
	}
	if r.Skill != "" && ev.Type == journal.ModelTurn {
		// A skill run has no iterations: each model turn is one.
		b.iteration(len(r.Iterations)+1, ev.Time)
		b.cur.Finished = true
	}
	if b.cur == nil {
		switch ev.Type {
		case journal.Error:
			return b.errorEntry(ev, decode)
		case "skill.act.end":
			return b.skillEnd(decode)
		}
		return nil // nothing to attach it to
	}
	return b.addIterationEvent(ev, decode)
}

// addIterationEvent records an event of the current iteration.
func (b *builder) addIterationEvent(ev journal.Event, decode func(any) error) error {
	switch ev.Type {
	case journal.PromptResolved:
		return b.onPromptResolved(ev, decode)
	case journal.ModelTurn:
		b.unreported = nil
		return b.onModelTurn(ev, decode)
	case journal.ModelUsage:
		return b.onModelUsage(ev, decode)
	case journal.ToolCall:
		return b.onToolCall(ev, decode)
	case journal.ToolDenied:
		return b.onToolDenied(ev, decode)
	case "skill.evidence":
		return b.onSkillEvidence(ev, decode)
	case journal.ModelRetry:
		b.entry(Entry{Kind: KindModelRetry, Time: ev.Time, Title: "provider retry", Detail: compactJSON(ev.Data)})
	case journal.SessionMessages:
		return b.onSessionMessages(ev, decode)
	case journal.QueryResult:
		return b.onQueryResult(ev, decode)
	case journal.StepTransition:
		return b.onStepTransition(ev, decode)
	case journal.CompletionCheck:
		return b.onCompletionCheck(ev, decode)
	case journal.ValidatorResult:
		return b.onValidatorResult(ev, decode)
	case string(event.KindTestCompare):
		return b.onTestCompare(ev, decode)
	case journal.RetryPrompt:
		return b.onRetryPrompt(ev, decode)
	case journal.Error:
		return b.errorEntry(ev, decode)
	case journal.ContextCompacted:
		return b.onContextCompacted(ev, decode)
	case journal.EscalationNotice:
		b.entry(Entry{Kind: KindWarning, Time: ev.Time, Title: "escalation", Detail: compactJSON(ev.Data)})
	case journal.IterationEnd:
		return b.onIterationEnd(ev, decode)
	case "skill.act.end":
		return b.skillEnd(decode)
	}
	return nil
}

func (b *builder) verdict() *Verdict {
	if b.cur.Verdict == nil {
		b.cur.Verdict = &Verdict{}
	}
	return b.cur.Verdict
}

func (b *builder) errorEntry(ev journal.Event, decode func(any) error) error {
	var s struct {
		Code, Message string
	}
	if err := decode(&s); err != nil {
		return err
	}
	e := Entry{Kind: KindError, Time: ev.Time, Title: s.Code, Detail: s.Message}
	if b.cur == nil {
		b.run.Warnings = append(b.run.Warnings, "error "+s.Code+": "+s.Message)
		return nil
	}
	b.entry(e)
	return nil
}

// skillEnd records a skill run's result: its artifacts and the validation
// of its expected outputs, as the verdict of the last turn.
func (b *builder) skillEnd(decode func(any) error) error {
	var s struct {
		Completed  bool   `json:"completed"`
		ExitReason string `json:"exitReason"`
		Artifacts  []struct {
			Handle string `json:"handle"`
			Path   string `json:"path"`
			Bytes  int64  `json:"bytes"`
		} `json:"artifacts"`
		Validation struct {
			OK      bool `json:"ok"`
			Outputs []struct {
				Path  string `json:"path"`
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			} `json:"outputs"`
		} `json:"validation"`
	}
	if err := decode(&s); err != nil {
		return err
	}
	for _, a := range s.Artifacts {
		b.run.Artifacts = append(b.run.Artifacts, Artifact{Handle: a.Handle, Path: a.Path, Bytes: a.Bytes})
	}
	if b.cur == nil {
		return nil
	}
	v := b.verdict()
	v.Result, v.Reason = "stop", s.ExitReason
	if s.Completed {
		v.Result = "complete"
	}
	for _, o := range s.Validation.Outputs {
		v.Validators = append(v.Validators, ValidatorResult{Name: o.Path, Type: "expected output", Valid: o.OK, Pattern: o.Error})
	}
	return nil
}

func (b *builder) finish() {
	b.closeIteration()
	its := b.run.Iterations
	sort.SliceStable(its, func(i, j int) bool { return its[i].N < its[j].N })
}
