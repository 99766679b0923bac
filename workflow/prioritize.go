package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/regularfile"
)

// Files of the prioritizer's exchange with its agent, in the subject
// store: the runner writes the batch's issue numbers, the agent writes
// its assignments.
const (
	IssueListFile  = "issue-list.json"
	PrioritiesFile = "priorities.json"
	// maxPrioritiesBytes bounds the agent's priorities.json.
	maxPrioritiesBytes = 1 << 20
)

// PrioritizerAgent is the agent prioritizer.agent names: the agents entry
// of that id when there is one, else the folder of that name.
func (w *Workflow) PrioritizerAgent() *Agent {
	if w.Prioritizer == nil || w.Prioritizer.Agent == "" {
		return nil
	}
	if a, ok := w.Agents[w.Prioritizer.Agent]; ok {
		return a
	}
	return &Agent{ID: w.Prioritizer.Agent, Role: Transformer, Directory: w.Prioritizer.Agent}
}

// Prioritize runs the prioritizer over a batch, as climpt's --prioritize
// does: the batch's issue numbers go to storeDir/issue-list.json, the
// prioritizer agent runs once, and its storeDir/priorities.json — a JSON
// array of {"issue", "priority"} — gives each issue its priority label
// (one of prioritizer.labels; another becomes defaultLabel, or is an
// error without one). Each issue's old priority labels are replaced by
// the new one. The agent's file is the model's: it may name only issues
// of the batch, and is refused whole when any entry is wrong, before any
// label changes. The batch is not run.
func (r *Runner) Prioritize(ctx context.Context, c Criteria, storeDir string) (event.WorkflowPrioritizeResult, error) {
	res := event.WorkflowPrioritizeResult{Issues: []int{}, Assignments: []event.WorkflowAssignment{}, Changed: []int{}}
	pr, a := r.Workflow.Prioritizer, r.Workflow.PrioritizerAgent()
	if a == nil {
		return res, errors.New("the workflow has no prioritizer.agent")
	}
	listed, err := r.Issues.List(ctx, c)
	if err != nil {
		return res, fmt.Errorf("list issues: %w", err)
	}
	labels := map[int][]string{}
	for _, it := range listed {
		res.Issues = append(res.Issues, it.Number)
		labels[it.Number] = it.Labels
	}
	defer func() { r.emit(res) }()
	if len(listed) == 0 {
		return res, nil
	}
	list, _ := json.Marshal(res.Issues)
	if err := writeAtomic(filepath.Join(storeDir, IssueListFile), list); err != nil {
		return res, fmt.Errorf("write the issue list for the prioritizer: %w", err)
	}
	out := filepath.Join(storeDir, PrioritiesFile)
	// An earlier run's file is not this run's answer.
	if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
		return res, fmt.Errorf("remove the old %s: %w", out, err)
	}
	r.emit(event.WorkflowDispatchEvent{Issue: 0, Phase: "prioritize", Agent: a.ID, Directory: a.Directory, Params: map[string]string{}})
	o, err := r.Dispatch.Dispatch(ctx, Dispatch{Agent: a, Params: map[string]string{}})
	if err != nil {
		return res, fmt.Errorf("dispatching prioritizer agent %s: %w", a.ID, err)
	}
	res.RunID = o.RunID
	outcome := map[bool]string{true: "success", false: "failed"}[o.Success]
	r.emit(event.WorkflowOutcomeEvent{Issue: 0, Agent: a.ID, Outcome: &outcome, Run: &o})
	if !o.Success {
		return res, fmt.Errorf("prioritizer agent %s did not complete (run %s: %s)", a.ID, o.RunID, o.Reason)
	}
	as, err := readPriorities(out, pr, labels)
	if err != nil {
		return res, err
	}
	res.Assignments = as
	for _, as := range as {
		cur := labels[as.Issue]
		var remove, add []string
		for _, l := range cur {
			if slices.Contains(pr.Labels, l) && l != as.Priority {
				remove = append(remove, l)
			}
		}
		if !slices.Contains(cur, as.Priority) {
			add = []string{as.Priority}
		}
		if len(remove) == 0 && len(add) == 0 {
			continue
		}
		err := r.Issues.EditLabels(ctx, as.Issue, remove, add)
		r.emit(event.WorkflowStepEvent{Issue: as.Issue, Step: "priority " + as.Priority, OK: err == nil, Error: errText(err)})
		if err != nil {
			return res, fmt.Errorf("issue %d: set priority %s: %w", as.Issue, as.Priority, err)
		}
		res.Changed = append(res.Changed, as.Issue)
	}
	return res, nil
}

// readPriorities reads and checks the agent's priorities.json.
func readPriorities(path string, pr *Prioritizer, batch map[int][]string) ([]event.WorkflowAssignment, error) {
	f, _, err := regularfile.Open(os.OpenFile, path)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("the prioritizer agent %s did not write %s: it must write there a JSON array of {\"issue\": N, \"priority\": LABEL} entries for the issues of %s",
			pr.Agent, path, filepath.Join(filepath.Dir(path), IssueListFile))
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxPrioritiesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(raw) > maxPrioritiesBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPrioritiesBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var as []event.WorkflowAssignment
	if err := dec.Decode(&as); err != nil {
		return nil, fmt.Errorf("%s: want a JSON array of {\"issue\": N, \"priority\": LABEL}: %w", path, err)
	}
	seen := map[int]bool{}
	for i := range as {
		a := &as[i]
		if _, ok := batch[a.Issue]; !ok {
			return nil, fmt.Errorf("%s: entry %d names issue %d, which is not in the batch (%s lists the batch)", path, i, a.Issue, IssueListFile)
		}
		if seen[a.Issue] {
			return nil, fmt.Errorf("%s: issue %d is given a priority twice", path, a.Issue)
		}
		seen[a.Issue] = true
		if !slices.Contains(pr.Labels, a.Priority) {
			if pr.DefaultLabel == "" {
				return nil, fmt.Errorf("%s: issue %d: priority %s is not one of prioritizer.labels (%v), and the workflow has no defaultLabel", path, a.Issue, strconv.Quote(a.Priority), pr.Labels)
			}
			a.Priority = pr.DefaultLabel
		}
	}
	return as, nil
}
