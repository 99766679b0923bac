package workflow

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// IsStart reports whether ev is the run.start event of a workflow run.
func IsStart(ev journal.Event) bool {
	if ev.Type != journal.RunStart {
		return false
	}
	var s event.WorkflowStart
	return json.Unmarshal(ev.Data, &s) == nil && s.Command == Command
}

// Account is what a workflow run's journal says, line by line.
type Account struct {
	ID    string               `json:"id"`
	Start *event.WorkflowStart `json:"start,omitempty"`
	End   *event.WorkflowEnd   `json:"end,omitempty"`
	Lines []Entry              `json:"entries"`
}

// Entry is one journaled event of a workflow run, in words.
type Entry struct {
	Time  time.Time       `json:"time"`
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	Data  json.RawMessage `json:"data,omitempty"`
	Issue int             `json:"issue,omitempty"`
}

// BuildAccount reads a workflow run's events.
func BuildAccount(id string, events []journal.Event) *Account {
	a := &Account{ID: id}
	for _, ev := range events {
		var d map[string]any
		_ = json.Unmarshal(ev.Data, &d)
		issue, _ := d["issue"].(float64)
		e := Entry{Time: ev.Time, Type: ev.Type, Data: ev.Data, Issue: int(issue)}
		switch event.Kind(ev.Type) {
		case event.KindRunStart:
			var s event.WorkflowStart
			if json.Unmarshal(ev.Data, &s) == nil {
				a.Start = &s
			}
			continue
		case event.KindRunEnd:
			var end event.WorkflowEnd
			if json.Unmarshal(ev.Data, &end) == nil {
				a.End = &end
			}
			continue
		case event.KindWorkflowIssueStart:
			e.Text = fmt.Sprintf("issue #%d", e.Issue)
		case event.KindWorkflowLabelSync:
			e.Text = "labels: " + labelSyncText(d["labels"])
		case event.KindWorkflowPhase:
			e.Text = fmt.Sprintf("  labels [%s] → phase %v", joinAny(d["labels"]), d["phase"])
		case event.KindWorkflowPlan:
			e.Text = "  plan (dry run): " + planText(ev.Data)
		case event.KindWorkflowDispatch:
			e.Text = fmt.Sprintf("  dispatch %v (%v) with %s", d["agent"], d["directory"], paramText(d["params"]))
		case event.KindWorkflowOutcome:
			e.Text = outcomeText(d)
		case event.KindWorkflowHandoff:
			e.Text = fmt.Sprintf("  handoff %v → %v", d["handoff"], d["artifact"])
		case event.KindWorkflowTransition:
			e.Text = fmt.Sprintf("  move %v → %v (outcome %v): remove [%s], add [%s]", d["from"], d["to"], d["outcome"], joinAny(d["remove"]), joinAny(d["add"]))
		case event.KindWorkflowStep:
			e.Text = fmt.Sprintf("    %v: %s", d["step"], okText(d))
		case event.KindWorkflowCompensation:
			e.Text = fmt.Sprintf("    undo %v: %s", d["compensation"], okText(d))
		case event.KindWorkflowPrioritize:
			var pr event.WorkflowPrioritizeResult
			_ = json.Unmarshal(ev.Data, &pr)
			e.Text = fmt.Sprintf("prioritize %d issues: %s", len(pr.Issues), assignmentText(pr.Assignments))
		case event.KindWorkflowIssueEnd:
			e.Text = fmt.Sprintf("  → %v at phase %v after %v moves", d["status"], d["finalPhase"], d["cycles"])
			if s, _ := d["error"].(string); s != "" {
				e.Text += ": " + s
			}
		default:
			e.Text = ev.Type
		}
		a.Lines = append(a.Lines, e)
	}
	return a
}

func assignmentText(as []event.WorkflowAssignment) string {
	if len(as) == 0 {
		return "no priorities"
	}
	var s []string
	for _, a := range as {
		s = append(s, fmt.Sprintf("#%d %s", a.Issue, a.Priority))
	}
	return strings.Join(s, ", ")
}

func okText(d map[string]any) string {
	if ok, _ := d["ok"].(bool); ok {
		return "ok"
	}
	return fmt.Sprintf("failed: %v", d["error"])
}

func outcomeText(d map[string]any) string {
	if s, _ := d["error"].(string); s != "" && d["outcome"] == nil {
		return "  dispatch failed: " + s
	}
	run, _ := d["run"].(map[string]any)
	var parts []string
	if run != nil {
		if id, _ := run["runId"].(string); id != "" {
			parts = append(parts, "run "+id)
		}
		if r, _ := run["completionReason"].(string); r != "" {
			parts = append(parts, r)
		}
		if v, _ := run["verdict"].(string); v != "" {
			parts = append(parts, "verdict "+v)
		}
	}
	t := fmt.Sprintf("  %v ended: outcome %v", d["agent"], d["outcome"])
	if s, _ := d["outcome"].(string); s == "" {
		t = fmt.Sprintf("  %v ended without an outcome", d["agent"])
	}
	if len(parts) > 0 {
		t += " (" + strings.Join(parts, ", ") + ")"
	}
	if s, _ := d["error"].(string); s != "" {
		t += ": " + s
	}
	return t
}

func joinAny(v any) string {
	list, _ := v.([]any)
	var s []string
	for _, x := range list {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}

func paramText(v any) string {
	m, _ := v.(map[string]any)
	var s []string
	for _, k := range sortedKeys(m) {
		s = append(s, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(s, " ")
}

func labelSyncText(v any) string {
	list, _ := v.([]any)
	var s []string
	for _, x := range list {
		m, _ := x.(map[string]any)
		s = append(s, fmt.Sprintf("%v %v", m["name"], m["action"]))
	}
	return strings.Join(s, ", ")
}

func planText(raw json.RawMessage) string {
	var p event.WorkflowPlan
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	return strings.Join(PlanText(p), "\n  ")
}

// WriteText writes the account as text, one event a line, terminal
// controls made visible by visible (the journal's words may come from
// files a model wrote).
func (a *Account) WriteText(w io.Writer, visible func(string) string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "workflow run %s", a.ID)
	if s := a.Start; s != nil {
		fmt.Fprintf(&b, ": %s on %s", s.Workflow, s.Issues)
		if s.DryRun {
			b.WriteString(" (dry run)")
		}
		if s.Stub {
			b.WriteString(" (stub dispatch)")
		}
		if s.Temporal != "" {
			b.WriteString(" on Temporal " + s.Temporal)
		}
	}
	b.WriteString("\n")
	for _, e := range a.Lines {
		b.WriteString(e.Text)
		b.WriteString("\n")
	}
	if a.End == nil {
		b.WriteString("unfinished: the journal has no end (the run was killed or is still running)\n")
	} else {
		fmt.Fprintf(&b, "status: %s\n", a.End.Status)
		if a.End.Error != "" {
			fmt.Fprintf(&b, "error: %s\n", a.End.Error)
		}
	}
	_, err := io.WriteString(w, visible(b.String()))
	return err
}
