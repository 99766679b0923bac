package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Issues is where a workflow reads and changes issues: GitHub through gh,
// or a local directory (Local) with the same operations.
type Issues interface {
	// Labels are the issue's labels, in the order the store keeps them.
	Labels(ctx context.Context, issue int) ([]string, error)
	// EditLabels removes and adds labels in one call.
	EditLabels(ctx context.Context, issue int, remove, add []string) error
	Comment(ctx context.Context, issue int, body string) error
	Close(ctx context.Context, issue int) error
	// Closed reports whether the issue is closed.
	Closed(ctx context.Context, issue int) (bool, error)
	// RecentComments are the bodies of the issue's last limit comments,
	// newest first.
	RecentComments(ctx context.Context, issue int, limit int) ([]string, error)
	List(ctx context.Context, c Criteria) ([]Listed, error)
	ListLabels(ctx context.Context) ([]LabelSpec, error)
	CreateLabel(ctx context.Context, l LabelSpec) error
	UpdateLabel(ctx context.Context, l LabelSpec) error
}

// Criteria select the issues of a batch.
type Criteria struct {
	Labels []string
	// State is open (default), closed or all.
	State string
	Limit int
}

// Listed is one issue of a List.
type Listed struct {
	Number int
	Labels []string
}

// GH is Issues on GitHub through the gh CLI. capstan runs gh with its
// own credentials: Path must be a gh the model cannot have written (not
// under the work dir) and Env holds only what gh needs.
type GH struct {
	// Path is the gh executable.
	Path string
	// Env is gh's whole environment.
	Env []string
	// Dir is where gh runs (its repository, unless Repo is set).
	Dir string
	// Repo is OWNER/NAME passed as --repo; "" lets gh use Dir's.
	Repo string
	// Timeout bounds one call (default 60 s).
	Timeout time.Duration
}

func (g *GH) run(ctx context.Context, args ...string) ([]byte, error) {
	if g.Repo != "" {
		args = append(args, "--repo", g.Repo)
	}
	d := g.Timeout
	if d <= 0 {
		d = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.Path, args...)
	cmd.Env, cmd.Dir = g.Env, g.Dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("gh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// Labels implements Issues.
func (g *GH) Labels(ctx context.Context, issue int) ([]string, error) {
	out, err := g.run(ctx, "issue", "view", strconv.Itoa(issue), "--json", "labels", "--jq", ".labels[].name")
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

// EditLabels implements Issues.
func (g *GH) EditLabels(ctx context.Context, issue int, remove, add []string) error {
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
	_, err := g.run(ctx, args...)
	return err
}

// Comment implements Issues.
func (g *GH) Comment(ctx context.Context, issue int, body string) error {
	_, err := g.run(ctx, "issue", "comment", strconv.Itoa(issue), "--body", body)
	return err
}

// Close implements Issues.
func (g *GH) Close(ctx context.Context, issue int) error {
	_, err := g.run(ctx, "issue", "close", strconv.Itoa(issue))
	return err
}

// Closed implements Issues.
func (g *GH) Closed(ctx context.Context, issue int) (bool, error) {
	out, err := g.run(ctx, "issue", "view", strconv.Itoa(issue), "--json", "state")
	if err != nil {
		return false, err
	}
	var st struct{ State string }
	if err := json.Unmarshal(out, &st); err != nil {
		return false, fmt.Errorf("gh issue view %d --json state: %w", issue, err)
	}
	return strings.EqualFold(st.State, "closed"), nil
}

// RecentComments implements Issues.
func (g *GH) RecentComments(ctx context.Context, issue int, limit int) ([]string, error) {
	out, err := g.run(ctx, "issue", "view", strconv.Itoa(issue), "--json", "comments", "--jq",
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

// List implements Issues.
func (g *GH) List(ctx context.Context, c Criteria) ([]Listed, error) {
	args := []string{"issue", "list", "--json", "number,title,labels,state"}
	if c.State != "" {
		args = append(args, "--state", c.State)
	}
	if c.Limit > 0 {
		args = append(args, "--limit", strconv.Itoa(c.Limit))
	}
	for _, l := range c.Labels {
		args = append(args, "--label", l)
	}
	out, err := g.run(ctx, args...)
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
	var items []Listed
	for _, r := range raw {
		it := Listed{Number: r.Number}
		for _, l := range r.Labels {
			it.Labels = append(it.Labels, l.Name)
		}
		items = append(items, it)
	}
	return items, nil
}

// ListLabels implements Issues.
func (g *GH) ListLabels(ctx context.Context) ([]LabelSpec, error) {
	out, err := g.run(ctx, "label", "list", "--json", "name,color,description", "--limit", "1000")
	if err != nil {
		return nil, err
	}
	var raw []struct{ Name, Color, Description string }
	if len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, &raw); err != nil {
			return nil, fmt.Errorf("gh label list: %w", err)
		}
	}
	var ls []LabelSpec
	for _, r := range raw {
		ls = append(ls, LabelSpec{Name: r.Name, Color: strings.ToLower(strings.TrimPrefix(r.Color, "#")), Description: r.Description})
	}
	return ls, nil
}

// CreateLabel implements Issues.
func (g *GH) CreateLabel(ctx context.Context, l LabelSpec) error {
	_, err := g.run(ctx, "label", "create", l.Name, "--color", l.Color, "--description", l.Description)
	return err
}

// UpdateLabel implements Issues.
func (g *GH) UpdateLabel(ctx context.Context, l LabelSpec) error {
	_, err := g.run(ctx, "label", "edit", l.Name, "--color", l.Color, "--description", l.Description)
	return err
}

// Local is Issues kept in a directory, in climpt's subject-store layout:
// <dir>/<number>/meta.json ({number, title, labels, state, assignees,
// milestone}), body.md, comments/<id>.md, and <dir>/labels.json for the
// repository's labels. Every write replaces its file atomically.
type Local struct {
	Dir string
}

type localMeta struct {
	Number    int      `json:"number"`
	Title     string   `json:"title"`
	Labels    []string `json:"labels"`
	State     string   `json:"state"`
	Assignees []string `json:"assignees"`
	Milestone *string  `json:"milestone"`
}

func (l *Local) metaPath(issue int) string {
	return filepath.Join(l.Dir, strconv.Itoa(issue), "meta.json")
}

func (l *Local) meta(issue int) (*localMeta, error) {
	b, err := os.ReadFile(l.metaPath(issue))
	if err != nil {
		return nil, fmt.Errorf("issue %d in %s: %w", issue, l.Dir, err)
	}
	var m localMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("issue %d: %s: %w", issue, l.metaPath(issue), err)
	}
	if m.Labels == nil {
		m.Labels = []string{}
	}
	return &m, nil
}

func (l *Local) save(issue int, m *localMeta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(l.metaPath(issue), b)
}

// writeAtomic replaces path with data through a temporary file.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// Labels implements Issues.
func (l *Local) Labels(_ context.Context, issue int) ([]string, error) {
	m, err := l.meta(issue)
	if err != nil {
		return nil, err
	}
	return m.Labels, nil
}

// EditLabels implements Issues.
func (l *Local) EditLabels(_ context.Context, issue int, remove, add []string) error {
	if len(remove) == 0 && len(add) == 0 {
		return nil
	}
	m, err := l.meta(issue)
	if err != nil {
		return err
	}
	m.Labels = slices.DeleteFunc(m.Labels, func(x string) bool { return slices.Contains(remove, x) })
	for _, a := range add {
		if !slices.Contains(m.Labels, a) {
			m.Labels = append(m.Labels, a)
		}
	}
	return l.save(issue, m)
}

// Comment implements Issues.
func (l *Local) Comment(_ context.Context, issue int, body string) error {
	if _, err := l.meta(issue); err != nil {
		return err
	}
	dir := filepath.Join(l.Dir, strconv.Itoa(issue), "comments")
	ids, err := l.commentIDs(issue)
	if err != nil {
		return err
	}
	next := time.Now().UnixMilli()
	if len(ids) > 0 && ids[len(ids)-1] >= next {
		next = ids[len(ids)-1] + 1
	}
	return writeAtomic(filepath.Join(dir, strconv.FormatInt(next, 10)+".md"), []byte(body))
}

// commentIDs are the issue's comment ids (millisecond times), oldest
// first.
func (l *Local) commentIDs(issue int) ([]int64, error) {
	entries, err := os.ReadDir(filepath.Join(l.Dir, strconv.Itoa(issue), "comments"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, e := range entries {
		if n, err := strconv.ParseInt(strings.TrimSuffix(e.Name(), ".md"), 10, 64); err == nil && strings.HasSuffix(e.Name(), ".md") {
			ids = append(ids, n)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Close implements Issues.
func (l *Local) Close(_ context.Context, issue int) error {
	m, err := l.meta(issue)
	if err != nil {
		return err
	}
	m.State = "closed"
	return l.save(issue, m)
}

// Closed implements Issues.
func (l *Local) Closed(_ context.Context, issue int) (bool, error) {
	m, err := l.meta(issue)
	if err != nil {
		return false, err
	}
	return strings.EqualFold(m.State, "closed"), nil
}

// RecentComments implements Issues.
func (l *Local) RecentComments(_ context.Context, issue int, limit int) ([]string, error) {
	ids, err := l.commentIDs(issue)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := len(ids) - 1; i >= 0 && len(out) < limit; i-- {
		b, err := os.ReadFile(filepath.Join(l.Dir, strconv.Itoa(issue), "comments", strconv.FormatInt(ids[i], 10)+".md"))
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, nil
}

// List implements Issues: the issues in number order, filtered as gh
// filters (state open by default, every label present, limit).
func (l *Local) List(_ context.Context, c Criteria) ([]Listed, error) {
	entries, err := os.ReadDir(l.Dir)
	if err != nil {
		return nil, err
	}
	var nums []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && n > 0 {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	state := c.State
	if state == "" {
		state = "open"
	}
	var out []Listed
	for _, n := range nums {
		m, err := l.meta(n)
		if err != nil {
			return nil, err
		}
		if state != "all" && !strings.EqualFold(m.State, state) {
			continue
		}
		ok := true
		for _, want := range c.Labels {
			ok = ok && slices.Contains(m.Labels, want)
		}
		if !ok {
			continue
		}
		out = append(out, Listed{Number: n, Labels: m.Labels})
		if c.Limit > 0 && len(out) == c.Limit {
			break
		}
	}
	return out, nil
}

func (l *Local) labelsPath() string { return filepath.Join(l.Dir, "labels.json") }

func (l *Local) labelMap() (map[string]Label, error) {
	b, err := os.ReadFile(l.labelsPath())
	if os.IsNotExist(err) {
		return map[string]Label{}, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	if json.Unmarshal(b, &names) == nil {
		m := map[string]Label{}
		for _, n := range names {
			m[n] = Label{}
		}
		return m, nil
	}
	m := map[string]Label{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", l.labelsPath(), err)
	}
	return m, nil
}

// Label is a label's color and description in labels.json.
type Label struct {
	Color       string `json:"color"`
	Description string `json:"description"`
}

// ListLabels implements Issues.
func (l *Local) ListLabels(context.Context) ([]LabelSpec, error) {
	m, err := l.labelMap()
	if err != nil {
		return nil, err
	}
	var out []LabelSpec
	for _, n := range sortedKeys(m) {
		out = append(out, LabelSpec{Name: n, Color: strings.ToLower(m[n].Color), Description: m[n].Description})
	}
	return out, nil
}

func (l *Local) putLabel(spec LabelSpec, create bool) error {
	m, err := l.labelMap()
	if err != nil {
		return err
	}
	if _, ok := m[spec.Name]; ok == create {
		if create {
			return fmt.Errorf("label %q already exists", spec.Name)
		}
		return fmt.Errorf("label %q does not exist", spec.Name)
	}
	m[spec.Name] = Label{Color: strings.ToLower(spec.Color), Description: spec.Description}
	b, _ := json.MarshalIndent(m, "", "  ")
	return writeAtomic(l.labelsPath(), b)
}

// CreateLabel implements Issues.
func (l *Local) CreateLabel(_ context.Context, spec LabelSpec) error { return l.putLabel(spec, true) }

// UpdateLabel implements Issues.
func (l *Local) UpdateLabel(_ context.Context, spec LabelSpec) error { return l.putLabel(spec, false) }
