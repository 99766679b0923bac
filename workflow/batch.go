package workflow

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/capstan-dev/capstan/event"
)

// statusRank orders statuses from best to worst: a batch's status is its
// worst issue's.
var statusRank = map[string]int{StatusCompleted: 0, StatusDryRun: 0, StatusBlocked: 1, StatusPhaseRepetition: 2, StatusCycleExceeded: 2, StatusFailed: 3}

// Worst is the worst of statuses ("" for none).
func Worst(statuses ...string) string {
	worst := ""
	for _, s := range statuses {
		if worst == "" || statusRank[s] > statusRank[worst] {
			worst = s
		}
	}
	return worst
}

// SyncLabels creates the workflow's declared labels the repository lacks
// and updates those whose color or description differ; a dry run only
// reports. Per-label failures are reported, not returned.
func (r *Runner) SyncLabels(ctx context.Context) ([]event.WorkflowLabelSync, error) {
	if len(r.Workflow.Labels) == 0 {
		return nil, nil
	}
	have, err := r.Issues.ListLabels(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the repository's labels: %w", err)
	}
	byName := map[string]LabelSpec{}
	for _, l := range have {
		byName[l.Name] = l
	}
	var out []event.WorkflowLabelSync
	for _, spec := range r.Workflow.Labels {
		cur, ok := byName[spec.Name]
		s := event.WorkflowLabelSync{Name: spec.Name}
		switch {
		case !ok:
			s.Action = "created"
		case cur.Color == spec.Color && cur.Description == spec.Description:
			s.Action = "unchanged"
		default:
			s.Action = "updated"
		}
		if !r.DryRun && s.Action != "unchanged" {
			var err error
			if s.Action == "created" {
				err = r.Issues.CreateLabel(ctx, spec)
			} else {
				err = r.Issues.UpdateLabel(ctx, spec)
			}
			if err != nil {
				s.Action, s.Error = "failed", err.Error()
			}
		}
		out = append(out, s)
	}
	r.emit(event.WorkflowLabelSyncEvent{Labels: out, DryRun: r.DryRun})
	return out, nil
}

// Order sorts a batch's actionable issues by the prioritizer's labels
// (most urgent first; issues without one as defaultLabel, else last),
// keeping the listed order among equals. Issues with no actionable phase
// are returned as skipped.
func (w *Workflow) Order(listed []Listed) (queue []int, skipped []int) {
	type item struct{ n, rank int }
	var items []item
	for _, it := range listed {
		ph, ok := w.resolve(it.Labels)
		if !ok || ph.Type != Actionable {
			skipped = append(skipped, it.Number)
			continue
		}
		items = append(items, item{n: it.Number, rank: w.priorityRank(it.Labels)})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].rank < items[j].rank })
	for _, it := range items {
		queue = append(queue, it.n)
	}
	return queue, skipped
}

func (w *Workflow) priorityRank(labels []string) int {
	if w.Prioritizer == nil {
		return 0
	}
	order := w.Prioritizer.Labels
	label := w.Prioritizer.DefaultLabel
	for _, l := range labels {
		if slices.Contains(order, l) {
			label = l
			break
		}
	}
	if i := slices.Index(order, label); i >= 0 {
		return i
	}
	return len(order)
}

// BatchResult is how a batch ended.
type BatchResult struct {
	Status  string                      `json:"status"`
	Issues  []event.WorkflowIssueResult `json:"issues"`
	Skipped []int                       `json:"skipped,omitempty"`
}

// RunBatch runs the listed issues one after another in priority order.
func (r *Runner) RunBatch(ctx context.Context, c Criteria) (BatchResult, error) {
	listed, err := r.Issues.List(ctx, c)
	if err != nil {
		return BatchResult{Status: StatusFailed}, fmt.Errorf("list issues: %w", err)
	}
	queue, skipped := r.Workflow.Order(listed)
	res := BatchResult{Skipped: skipped, Issues: []event.WorkflowIssueResult{}}
	for i, n := range queue {
		if i > 0 {
			if err := r.sleep(ctx, r.Workflow.Rules.CycleDelayMs); err != nil {
				return res, err
			}
		}
		res.Issues = append(res.Issues, r.RunIssue(ctx, n))
	}
	var st []string
	for _, ir := range res.Issues {
		st = append(st, ir.Status)
	}
	res.Status = Worst(st...)
	if res.Status == "" {
		res.Status = StatusCompleted
	}
	return res, nil
}
