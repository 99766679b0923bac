package runreport

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/pipeline"
)

// PipelineCommand is the command a pipeline run's run.start event names
// (its "command" field): what tells a pipeline journal from an agent's.
const PipelineCommand = "pipeline run"

// Pipeline is what the journal of a `capstan pipeline run` holds: the
// pipeline, the request, and each stage's outcome in the order the stages
// ended.
type Pipeline struct {
	// File is the pipeline YAML file ("" = the standard pipeline).
	File    string  `json:"file,omitempty"`
	Request string  `json:"request"`
	Repo    string  `json:"repo,omitempty"`
	Stages  []Stage `json:"stages"`
	// AgentRuns are the runs of the pipeline's agent stages, each with a
	// journal of its own.
	AgentRuns []AgentRun `json:"agentRuns,omitempty"`
}

// Name is how the pipeline is named in an account: its file, or "the
// standard pipeline".
func (p *Pipeline) Name() string {
	if p.File == "" {
		return "the standard pipeline"
	}
	return p.File
}

// Stage is one stage's outcome.
type Stage struct {
	ID string `json:"id"`
	// Status is succeeded, violated, failed, skipped or canceled.
	Status      string        `json:"status"`
	Attempts    int           `json:"attempts"`
	Duration    time.Duration `json:"durationNs,omitempty"`
	KeysWritten []string      `json:"keysWritten,omitempty"`
	Error       string        `json:"error,omitempty"`
	// Violations are the contract violations the stage caused.
	Violations []string `json:"violations,omitempty"`
}

// OK reports whether the stage succeeded.
func (s Stage) OK() bool { return s.Status == pipeline.StatusSucceeded }

// Summary is the stage's outcome on one line: status, attempts, duration
// and the keys it wrote.
func (s Stage) Summary() string {
	parts := []string{s.Status}
	if s.Attempts > 1 {
		parts = append(parts, fmt.Sprintf("%d attempts", s.Attempts))
	}
	if s.Duration > 0 {
		parts = append(parts, FormatDuration(s.Duration))
	}
	if len(s.KeysWritten) > 0 {
		parts = append(parts, "wrote "+strings.Join(s.KeysWritten, ", "))
	}
	return strings.Join(parts, "  ")
}

// AgentRun is the run of an agent stage.
type AgentRun struct {
	Dir     string `json:"dir"`
	RunID   string `json:"runId,omitempty"`
	Success bool   `json:"success"`
	Reason  string `json:"completionReason,omitempty"`
}

// addPipeline reads the events only a pipeline run journals; it reports
// whether ev was one.
func (b *builder) addPipeline(ev journal.Event, decode func(any) error) (bool, error) {
	p := b.run.Pipeline
	if p == nil {
		return false, nil
	}
	switch ev.Type {
	case string(event.KindPipelineStage):
		var s struct {
			AgentID     string   `json:"agent_id"`
			Status      string   `json:"status"`
			Attempts    int      `json:"attempts"`
			KeysWritten []string `json:"keys_written"`
			DurationMs  float64  `json:"duration_ms"`
			Error       string   `json:"error"`
		}
		if err := decode(&s); err != nil {
			return true, err
		}
		p.Stages = append(p.Stages, Stage{ID: s.AgentID, Status: s.Status, Attempts: s.Attempts, KeysWritten: s.KeysWritten,
			Duration: time.Duration(s.DurationMs * float64(time.Millisecond)), Error: s.Error})
	case string(event.KindPipelineViolation):
		var v event.PipelineViolation
		if err := decode(&v); err != nil {
			return true, err
		}
		// Journaled right after the stage that caused it.
		for i := len(p.Stages) - 1; i >= 0; i-- {
			if p.Stages[i].ID == v.AgentID {
				p.Stages[i].Violations = append(p.Stages[i].Violations, fmt.Sprintf("%s %s: %s", v.Kind, v.Key, v.Message))
				break
			}
		}
	case journal.AgentRun:
		var s struct {
			Dir    string `json:"dir"`
			Result *struct {
				RunID            string `json:"runId"`
				Success          bool   `json:"success"`
				CompletionReason string `json:"completionReason"`
			} `json:"result"`
		}
		if err := decode(&s); err != nil {
			return true, err
		}
		run := AgentRun{Dir: s.Dir}
		if s.Result != nil {
			run.RunID, run.Success, run.Reason = s.Result.RunID, s.Result.Success, s.Result.CompletionReason
		}
		p.AgentRuns = append(p.AgentRuns, run)
	default:
		return false, nil
	}
	return true, nil
}

// IsPipelineStart reports whether ev is the run.start event of a pipeline
// run.
func IsPipelineStart(ev journal.Event) bool {
	return ev.Type == journal.RunStart && pipelineStart(ev.Data) != nil
}

// pipelineStart makes the Pipeline of a run.start event data, nil when the
// run is not a pipeline run.
func pipelineStart(data json.RawMessage) *Pipeline {
	var s struct {
		Command, File, Request, Repo string
	}
	if json.Unmarshal(data, &s) != nil || s.Command != PipelineCommand {
		return nil
	}
	return &Pipeline{File: s.File, Request: s.Request, Repo: s.Repo, Stages: []Stage{}}
}

// runEndError reads a run.end event's error: an object with code, message
// and recoverable (agent and skill runs), or a message with the code beside
// it in errorCode (pipeline runs).
func runEndError(o *Outcome, raw json.RawMessage, code string) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var msg string
	if json.Unmarshal(raw, &msg) == nil {
		o.ErrorCode, o.ErrorMessage = code, msg
		return
	}
	var e struct {
		Code, Message string
		Recoverable   bool
	}
	if json.Unmarshal(raw, &e) == nil {
		o.ErrorCode, o.ErrorMessage, o.Recoverable = e.Code, e.Message, e.Recoverable
	}
}
