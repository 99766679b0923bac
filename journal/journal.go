// Package journal writes and reads capstan's run journal: an append-only
// JSON Lines file, .capstan/runs/<run-id>/events.jsonl under the work dir,
// one event per line, each written with a single write(2) as it happens so a
// run killed at any point leaves every finished event readable.
package journal

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event types written by capstan. Consumers must ignore types they do not
// know: new types are added over time.
const (
	RunStart         = "run.start"
	RunEnd           = "run.end"
	IterationStart   = "iteration.start"
	IterationEnd     = "iteration.end"
	PromptResolved   = "prompt.resolved"
	QueryStart       = "query.start"
	QueryResult      = "query.result"
	ModelTurn        = "model.turn"
	ModelRetry       = "model.retry" // a provider retries a failed API call
	SessionMessages  = "session.messages"
	ContextCompacted = "context.compacted" // older turns were stubbed or summarized to fit the context window
	ToolCall         = "tool.call"
	ToolDenied       = "tool.denied"
	ValidatorResult  = "validator.result"
	RetryPrompt      = "retry.prompt"
	StepTransition   = "step.transition"
	CompletionCheck  = "completion.check"
	Warning          = "warning"
	Error            = "error"
	LifecycleChange  = "lifecycle"
	EscalationNotice = "escalation"
)

// Event is one journal line.
type Event struct {
	Seq       int64           `json:"seq"`
	Time      time.Time       `json:"time"`
	Type      string          `json:"type"`
	Iteration int             `json:"iteration,omitempty"`
	Step      string          `json:"step,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// Emitter receives events. *Writer implements it; Discard drops them.
type Emitter interface {
	Emit(eventType string, data any)
}

type discard struct{}

func (discard) Emit(string, any) {}

// Discard is an Emitter that drops every event.
var Discard Emitter = discard{}

// RunsDir is the directory, relative to a work dir, that holds run journals.
const RunsDir = ".capstan/runs"

// FileName is the journal file inside a run directory.
const FileName = "events.jsonl"

// NewRunID returns a sortable, unique run id: UTC time plus random suffix.
func NewRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Writer appends events to one run's journal. It is safe for concurrent use.
type Writer struct {
	mu        sync.Mutex
	f         *os.File
	buf       bytes.Buffer
	seq       int64
	iteration int
	step      string
	now       func() time.Time
	err       error
	path      string
}

// Create makes .capstan/runs/<runID>/events.jsonl under workDir and returns a
// Writer for it. It fails if the file already exists. The .capstan folder
// gets a .gitignore of "*" so journals never make a git work tree dirty
// (the agent's own git-clean checks must not see them).
func Create(workDir, runID string) (*Writer, error) {
	dir := filepath.Join(workDir, RunsDir, runID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: create run dir: %w", err)
	}
	ignore := filepath.Join(workDir, filepath.Dir(RunsDir), ".gitignore")
	if f, err := os.OpenFile(ignore, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
		_, werr := f.WriteString("# capstan run journals\n*\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("journal: write %s: %w", ignore, werr)
		}
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", path, err)
	}
	return &Writer{f: f, now: time.Now, path: path}, nil
}

// Append opens an existing journal for appending (used by resume). The
// sequence continues after the last readable event.
func Append(path string) (*Writer, error) {
	events, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	w := &Writer{f: f, now: time.Now, path: path}
	if n := len(events); n > 0 {
		w.seq = events[n-1].Seq
	}
	return w, nil
}

// Path is the journal file's path.
func (w *Writer) Path() string { return w.path }

// SetPosition sets the iteration and step stamped on following events.
func (w *Writer) SetPosition(iteration int, step string) {
	w.mu.Lock()
	w.iteration, w.step = iteration, step
	w.mu.Unlock()
}

// Emit appends one event. data is marshalled with encoding/json; a value
// that cannot be marshalled is recorded as {"marshal_error": "..."} rather
// than dropped. Write failures are kept and reported by Err and Close.
func (w *Writer) Emit(eventType string, data any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return
	}
	w.seq++
	w.buf.Reset()
	b := w.buf.AvailableBuffer()
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, w.seq, 10)
	b = append(b, `,"time":"`...)
	b = w.now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = appendJSONString(b, eventType)
	if w.iteration != 0 {
		b = append(b, `,"iteration":`...)
		b = strconv.AppendInt(b, int64(w.iteration), 10)
	}
	if w.step != "" {
		b = append(b, `,"step":`...)
		b = appendJSONString(b, w.step)
	}
	w.buf.Write(b)
	if data != nil {
		w.buf.WriteString(`,"data":`)
		enc := json.NewEncoder(&w.buf)
		enc.SetEscapeHTML(false)
		mark := w.buf.Len()
		if err := enc.Encode(data); err != nil {
			w.buf.Truncate(mark)
			fmt.Fprintf(&w.buf, `{"marshal_error":%q}`, err.Error())
		} else {
			w.buf.Truncate(w.buf.Len() - 1) // Encode's newline
		}
	}
	w.buf.WriteString("}\n")
	if _, err := w.f.Write(w.buf.Bytes()); err != nil && w.err == nil {
		w.err = fmt.Errorf("journal: write %s: %w", w.path, err)
	}
}

// Err returns the first write error, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close syncs and closes the file. It is safe to call more than once.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return w.err
	}
	syncErr := w.f.Sync()
	closeErr := w.f.Close()
	w.f = nil
	return errors.Join(w.err, syncErr, closeErr)
}

// appendJSONString appends s as a JSON string. Plain ASCII (the common
// case for event types and step ids) is copied as is; anything else goes
// through encoding/json, which also replaces invalid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ReadFile reads a journal. A final line cut short by a crash is ignored;
// a malformed line elsewhere is an error naming its line number.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// Read parses journal lines from r; name is used in error messages.
func Read(r io.Reader, name string) ([]Event, error) {
	br := bufio.NewReaderSize(r, 64*1024)
	var events []Event
	line := 0
	for {
		raw, err := br.ReadBytes('\n')
		if len(raw) > 0 {
			line++
			complete := raw[len(raw)-1] == '\n'
			trimmed := bytes.TrimSpace(raw)
			if len(trimmed) > 0 {
				var ev Event
				if uerr := json.Unmarshal(trimmed, &ev); uerr != nil {
					if !complete && err == io.EOF {
						break // torn final write
					}
					return events, fmt.Errorf("journal: %s:%d: malformed event: %w", name, line, uerr)
				}
				events = append(events, ev)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return events, fmt.Errorf("journal: read %s: %w", name, err)
		}
	}
	return events, nil
}

// Run describes one run directory found under a work dir.
type Run struct {
	ID      string
	Path    string // journal file
	Started time.Time
}

// List returns the runs under workDir, newest first.
func List(workDir string) ([]Run, error) {
	base := filepath.Join(workDir, RunsDir)
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: list %s: %w", base, err)
	}
	var runs []Run
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(base, e.Name(), FileName)
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		runs = append(runs, Run{ID: e.Name(), Path: p, Started: st.ModTime()})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID > runs[j].ID })
	return runs, nil
}

// Find resolves a run id (or a unique prefix of one) under workDir.
func Find(workDir, id string) (Run, error) {
	runs, err := List(workDir)
	if err != nil {
		return Run{}, err
	}
	var match []Run
	for _, r := range runs {
		if r.ID == id {
			return r, nil
		}
		if strings.HasPrefix(r.ID, id) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return Run{}, fmt.Errorf("journal: no run %q under %s", id, filepath.Join(workDir, RunsDir))
	default:
		return Run{}, fmt.Errorf("journal: run id %q is ambiguous (%d runs match)", id, len(match))
	}
}
