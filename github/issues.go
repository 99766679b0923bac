package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ListFilter selects the issues of a list: by labels (all of them), state
// (open, the default, closed or all) and at most Limit (0: gh's default).
type ListFilter struct {
	Labels []string
	// State is open (default), closed or all.
	State string
	Limit int
}

// ListedIssue is one issue of a list: its number and labels.
type ListedIssue struct {
	Number int
	Labels []string
}

// Label is one of a repository's labels.
type Label struct {
	Name        string
	Color       string
	Description string
}

// Labels implements workflow.Issues.
func (g *CLI) Labels(ctx context.Context, issue int) ([]string, error) {
	out, err := g.Output(ctx, "issue", "view", strconv.Itoa(issue), "--json", "labels", "--jq", ".labels[].name")
	if err != nil {
		return nil, err
	}
	var labels []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			labels = append(labels, l)
		}
	}
	return labels, nil
}

// EditLabels implements workflow.Issues.
func (g *CLI) EditLabels(ctx context.Context, issue int, remove, add []string) error {
	if len(remove) == 0 && len(add) == 0 {
		return nil
	}
	args := []string{"issue", "edit", strconv.Itoa(issue)}
	for _, l := range remove {
		args = append(args, "--remove-label", l)
	}
	for _, l := range add {
		args = append(args, "--add-label", l)
	}
	_, err := g.Output(ctx, args...)
	return err
}

// Comment implements workflow.Issues.
func (g *CLI) Comment(ctx context.Context, issue int, body string) error {
	_, err := g.Output(ctx, "issue", "comment", strconv.Itoa(issue), "--body", body)
	return err
}

// Close implements workflow.Issues.
func (g *CLI) Close(ctx context.Context, issue int) error {
	_, err := g.Output(ctx, "issue", "close", strconv.Itoa(issue))
	return err
}

// Closed implements workflow.Issues.
func (g *CLI) Closed(ctx context.Context, issue int) (bool, error) {
	out, err := g.Output(ctx, "issue", "view", strconv.Itoa(issue), "--json", "state")
	if err != nil {
		return false, err
	}
	var st struct{ State string }
	if err := json.Unmarshal(out, &st); err != nil {
		return false, fmt.Errorf("gh issue view %d --json state: %w", issue, err)
	}
	return strings.EqualFold(st.State, "closed"), nil
}

// RecentComments implements workflow.Issues.
func (g *CLI) RecentComments(ctx context.Context, issue int, limit int) ([]string, error) {
	out, err := g.Output(ctx, "issue", "view", strconv.Itoa(issue), "--json", "comments", "--jq",
		fmt.Sprintf(".comments | sort_by(.createdAt) | reverse | .[0:%d] | map({body, createdAt})", limit))
	if err != nil {
		return nil, err
	}
	var cs []struct{ Body string }
	if len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, &cs); err != nil {
			return nil, fmt.Errorf("gh issue view %d --json comments: %w", issue, err)
		}
	}
	var bodies []string
	for _, c := range cs {
		bodies = append(bodies, c.Body)
	}
	return bodies, nil
}

// List implements workflow.Issues.
func (g *CLI) List(ctx context.Context, f ListFilter) ([]ListedIssue, error) {
	args := []string{"issue", "list", "--json", "number,title,labels,state"}
	if f.State != "" {
		args = append(args, "--state", f.State)
	}
	if f.Limit > 0 {
		args = append(args, "--limit", strconv.Itoa(f.Limit))
	}
	for _, l := range f.Labels {
		args = append(args, "--label", l)
	}
	out, err := g.Output(ctx, args...)
	if err != nil {
		return nil, err
	}
	var raw []struct {
		Number int
		Labels []struct{ Name string }
	}
	if len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, &raw); err != nil {
			return nil, fmt.Errorf("gh issue list: %w", err)
		}
	}
	var items []ListedIssue
	for _, r := range raw {
		it := ListedIssue{Number: r.Number}
		for _, l := range r.Labels {
			it.Labels = append(it.Labels, l.Name)
		}
		items = append(items, it)
	}
	return items, nil
}

// ListLabels implements workflow.Issues.
func (g *CLI) ListLabels(ctx context.Context) ([]Label, error) {
	out, err := g.Output(ctx, "label", "list", "--json", "name,color,description", "--limit", "1000")
	if err != nil {
		return nil, err
	}
	var raw []struct{ Name, Color, Description string }
	if len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, &raw); err != nil {
			return nil, fmt.Errorf("gh label list: %w", err)
		}
	}
	var ls []Label
	for _, r := range raw {
		ls = append(ls, Label{Name: r.Name, Color: strings.ToLower(strings.TrimPrefix(r.Color, "#")), Description: r.Description})
	}
	return ls, nil
}

// CreateLabel implements workflow.Issues.
func (g *CLI) CreateLabel(ctx context.Context, l Label) error {
	_, err := g.Output(ctx, "label", "create", l.Name, "--color", l.Color, "--description", l.Description)
	return err
}

// UpdateLabel implements workflow.Issues.
func (g *CLI) UpdateLabel(ctx context.Context, l Label) error {
	_, err := g.Output(ctx, "label", "edit", l.Name, "--color", l.Color, "--description", l.Description)
	return err
}
