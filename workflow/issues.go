package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/github"
)

// Issues is where a workflow reads and changes issues: GitHub through gh
// (*github.CLI), or a local directory (Local) with the same operations.
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

// GitHub's issues are an Issues store.
var _ Issues = (*github.CLI)(nil)

// Criteria select the issues of a batch.
type Criteria = github.ListFilter

// Listed is one issue of a List.
type Listed = github.ListedIssue

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
	if errors.Is(err, fs.ErrNotExist) {
		return nil, l.noIssueError(issue)
	}
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

// noIssueError says that the store has no issue of that number, and
// which it has.
func (l *Local) noIssueError(issue int) error {
	held := "the store holds no issues"
	if nums, err := l.numbers(); err == nil && len(nums) > 0 {
		var s []string
		for _, n := range nums {
			s = append(s, "#"+strconv.Itoa(n))
		}
		held = "the store holds " + strings.Join(s, " ")
	} else if err != nil {
		held = err.Error()
	}
	return fmt.Errorf("no issue %d in %s: %s does not exist (%s)", issue, l.Dir, l.metaPath(issue), held)
}

// numbers are the numbers of the store's issue folders, in order.
func (l *Local) numbers() ([]int, error) {
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
	return nums, nil
}

func (l *Local) save(issue int, m *localMeta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(l.metaPath(issue), append(b, '\n'))
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
	nums, err := l.numbers()
	if err != nil {
		return nil, err
	}
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
	return writeAtomic(l.labelsPath(), append(b, '\n'))
}

// CreateLabel implements Issues.
func (l *Local) CreateLabel(_ context.Context, spec LabelSpec) error { return l.putLabel(spec, true) }

// UpdateLabel implements Issues.
func (l *Local) UpdateLabel(_ context.Context, spec LabelSpec) error { return l.putLabel(spec, false) }
