// Package journal writes and reads capstan's run journal: an append-only
// JSON Lines file, <state dir>/runs/<work dir key>/<run-id>/events.jsonl
// (see Store), one event per line, each written with a single write(2) as
// it happens so a run killed at any point leaves every finished event
// readable. Each event carries the hash of the line before it ("prev"), so
// an edited, inserted or deleted line breaks the chain and readers report
// it.
package journal

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Event types written by capstan. Consumers must ignore types they do not
// know: new types are added over time.
const (
	RunStart       = "run.start"
	RunEnd         = "run.end"
	IterationStart = "iteration.start"
	IterationEnd   = "iteration.end"
	PromptResolved = "prompt.resolved"
	QueryStart     = "query.start"
	QueryResult    = "query.result"
	ModelTurn      = "model.turn"
	// ModelUsage is the usage a model response reported at its start,
	// before its model.turn: a response a kill cut while it streamed was
	// billed for it all the same.
	ModelUsage       = "model.usage"
	ModelRetry       = "model.retry" // a provider retries a failed API call
	SessionMessages  = "session.messages"
	ContextCompacted = "context.compacted" // older turns were stubbed or summarized to fit the context window
	ToolCall         = "tool.call"
	ToolDenied       = "tool.denied"
	// ToolIntent is written before a tool call runs (the tool-effect
	// ledger): a call with an intent and no tool.call was cut by a kill.
	ToolIntent       = "tool.intent"
	ValidatorResult  = "validator.result"
	RetryPrompt      = "retry.prompt"
	StepTransition   = "step.transition"
	CompletionCheck  = "completion.check"
	Warning          = "warning"
	Error            = "error"
	LifecycleChange  = "lifecycle"
	EscalationNotice = "escalation"
	// GitHubCall is one gh call capstan made after the run completed to
	// apply runner.integrations.github.
	GitHubCall = "github.call"
	// AgentRun is one agent a pipeline's agent stage ran (in a pipeline
	// run's journal).
	AgentRun = "agent.run"
	// Repaired is written when a journal is reopened after a kill left a
	// line cut short: the cut bytes were moved to a side file (RepairEvent).
	Repaired = "journal.repaired"
)

// Activity event types are live progress (a validator or the test
// baseline started, ended); a Writer drops them, since the events that
// follow them record each one's result. Package event delivers them.
const (
	ActivityStart = "activity.start"
	ActivityEnd   = "activity.end"
)

// Event is one journal line.
type Event struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	Iteration int       `json:"iteration,omitempty"`
	Step      string    `json:"step,omitempty"`
	// Prev is the hash of the line before this one (Genesis for the first
	// line); empty in journals written before capstan chained its events.
	Prev string          `json:"prev,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Format is the version of the journal's event set that this capstan
// writes, recorded in every run.start (its "format"; absent means 1).
// Format 2: the step machine's state after an iteration is iteration.end's
// stepState, not a step.state event of its own. Readers read both.
const Format = 2

// Genesis is the prev of a journal's first event.
const Genesis = "0"

// LineHash is the chain hash of one journal line (without its newline):
// the first 128 bits of its SHA-256, in hex.
func LineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:16])
}

// RunsDir is the directory, relative to a work dir, where capstan versions
// before the state directory kept run journals (and where an explicit
// journal dir such as `pipeline run --journal-dir` keeps them). Runs found
// there are still listed, shown and resumed.
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
	seq       int64
	iteration int
	step      string
	now       func() time.Time
	err       error
	path      string
	// dir, when set, is the run folder the journal was made in, opened
	// without following links (Create): the journal is found again there,
	// by name, never through the path.
	dir    *os.Root
	opened fileID // the file f is, to notice when path no longer is
	// checkPath asks the next event to look the journal's path up (a new
	// position: see stillThere).
	checkPath bool
	prev      [32]byte // chain hash (hex) of the last line written
	prevLen   int      // bytes of prev in use (len(Genesis) for a new journal)
}

// Create makes <dir>/.capstan/runs/<runID>/events.jsonl and returns a Writer
// for it. It fails if the file already exists. The .capstan folder gets a
// .gitignore of "*" so journals never make a git work tree dirty. capstan
// run keeps its journals in a Store instead; Create is for an explicit
// journal dir (pipeline run --journal-dir) and tests.
//
// dir is followed as given; everything under it (.capstan, runs, the run
// folder, the journal, and the journal when the writer finds it again) is
// made and opened without following a symbolic link and without leaving
// dir (os.Root): dir may be a work dir, where a model can plant a link
// such as .capstan/runs → elsewhere, and the journal must not be written
// through it.
func Create(dir, runID string) (*Writer, error) {
	if !validRunID(runID) {
		return nil, fmt.Errorf("journal: invalid run id %q", runID)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: create run dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: create run dir: %w", err)
	}
	defer root.Close()
	capstanDir := filepath.Dir(RunsDir)
	if err := mkdirNoFollow(root, dir, capstanDir, 0o755); err != nil {
		return nil, err
	}
	ignore := filepath.Join(capstanDir, ".gitignore")
	if f, err := root.OpenFile(ignore, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o644); err == nil {
		_, werr := f.WriteString("# capstan run journals\n*\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("journal: write %s: %w", filepath.Join(dir, ignore), werr)
		}
	}
	runDir := filepath.Join(RunsDir, runID)
	for _, d := range []string{RunsDir, runDir} {
		if err := mkdirNoFollow(root, dir, d, 0o755); err != nil {
			return nil, err
		}
	}
	sub, err := root.OpenRoot(runDir)
	if err != nil {
		return nil, fmt.Errorf("journal: create run dir: %w", err)
	}
	path := filepath.Join(dir, runDir, FileName)
	f, err := sub.OpenFile(FileName, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|noFollow, 0o600)
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("journal: create %s: %w", path, err)
	}
	w := &Writer{f: f, now: time.Now, path: path, dir: sub}
	if w.opened, err = idOf(f); err != nil {
		f.Close()
		sub.Close()
		return nil, fmt.Errorf("journal: create %s: %w", path, err)
	}
	w.setPrev(Genesis)
	return w, nil
}

// validRunID reports whether id can name a run folder: not empty, no
// separator, no control character, not . or ..
func validRunID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`) && !strings.ContainsFunc(id, unicode.IsControl)
}

// mkdirNoFollow makes the folder rel of root (named dir for messages) if it
// is not there; a symbolic link, or something other than a folder, in its
// place is refused.
func mkdirNoFollow(root *os.Root, dir, rel string, perm os.FileMode) error {
	fi, err := root.Lstat(rel)
	if errors.Is(err, os.ErrNotExist) {
		if err = root.Mkdir(rel, perm); err == nil || !errors.Is(err, os.ErrExist) {
			if err != nil {
				return fmt.Errorf("journal: create run dir: %w", err)
			}
			return nil
		}
		fi, err = root.Lstat(rel)
	}
	if err != nil {
		return fmt.Errorf("journal: create run dir: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("journal: %s is a symbolic link; capstan does not write a journal through a link under %s (remove it, or give another --journal-dir)", filepath.Join(dir, rel), dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("journal: %s is not a folder (remove it, or give another --journal-dir)", filepath.Join(dir, rel))
	}
	return nil
}

// CreateFile creates a new, empty journal at path (its directory is made
// with dirPerm) and returns a Writer for it. It fails if the file exists.
func CreateFile(path string, dirPerm os.FileMode) (*Writer, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return nil, fmt.Errorf("journal: create run dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", path, err)
	}
	w := &Writer{f: f, now: time.Now, path: path}
	if w.opened, err = idOf(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: create %s: %w", path, err)
	}
	w.setPrev(Genesis)
	return w, nil
}

// TornSuffix names the side file next to a journal that keeps the bytes
// Append cut from a torn final line (events.jsonl.torn).
const TornSuffix = ".torn"

// RepairEvent is the payload of a journal.repaired event.
type RepairEvent struct {
	// Offset is where the torn line started; Bytes how many bytes were cut.
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
	// SideFile is the file the cut bytes were appended to.
	SideFile string `json:"sideFile"`
}

// Append opens an existing journal for appending (used by resume). A final
// line cut short by a kill is repaired first: its bytes are appended to the
// side file <path>.torn, the journal is truncated to its last whole line,
// and a journal.repaired event records the cut. The sequence and the hash
// chain continue after the last whole event. A journal whose chain is
// broken, or with an unreadable line before its end, is not appended to:
// extending it would make a forged or damaged record look continuous.
func Append(path string) (*Writer, error) {
	events, in, err := ReadChecked(path)
	if err != nil {
		return nil, err
	}
	if err := in.Err(); err != nil {
		return nil, fmt.Errorf("journal: %s: %w", path, err)
	}
	var repair *RepairEvent
	if in.TornTail != nil {
		if repair, err = cutTornTail(path, in.Size); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	w := &Writer{f: f, now: time.Now, path: path}
	if w.opened, err = idOf(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	w.setPrev(in.last)
	if n := len(events); n > 0 {
		w.seq = events[n-1].Seq
	}
	if repair != nil {
		w.Append(Repaired, repair)
	}
	return w, nil
}

// cutTornTail moves the bytes of path after size into the side file and
// truncates path to size. The side file is synced before the journal is
// cut, so the bytes are never lost.
func cutTornTail(path string, size int64) (*RepairEvent, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("journal: repair %s: %w", path, err)
	}
	defer f.Close()
	side := path + TornSuffix
	sf, err := os.OpenFile(side, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: repair %s: %w", path, err)
	}
	n, err := io.Copy(sf, io.NewSectionReader(f, size, 1<<62))
	if err == nil {
		_, err = sf.Write([]byte{'\n'})
	}
	if err == nil {
		err = sf.Sync()
	}
	if cerr := sf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("journal: repair %s: keep torn line in %s: %w", path, side, err)
	}
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("journal: repair %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("journal: repair %s: %w", path, err)
	}
	return &RepairEvent{Offset: size, Bytes: n, SideFile: filepath.Base(side)}, nil
}

// setPrev sets the chain hash the next event carries.
func (w *Writer) setPrev(h string) { w.prevLen = copy(w.prev[:], h) }

// Path is the journal file's path.
func (w *Writer) Path() string { return w.path }

// SetPosition sets the iteration and step stamped on following events.
func (w *Writer) SetPosition(iteration int, step string) {
	w.mu.Lock()
	if iteration != w.iteration || step != w.step {
		w.checkPath = true
	}
	w.iteration, w.step = iteration, step
	w.mu.Unlock()
}

// Append appends one event of type eventType. data is marshalled with
// encoding/json, or by its own AppendJSON when it is an AppendJSONer (a
// run's events reach a journal as typed payloads through event.Journal,
// which calls Append); a value
// that cannot be marshalled is recorded as {"marshal_error": "..."} rather
// than dropped. Write failures are kept and reported by Err and Close.
// Activity events (ActivityStart, ActivityEnd) are not written.
func (w *Writer) Append(eventType string, data any) {
	if eventType == ActivityStart || eventType == ActivityEnd {
		return // live progress only
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return
	}
	w.seq++
	buf := lineBuffers.Get().(*bytes.Buffer)
	defer putLineBuffer(buf)
	buf.Reset()
	b := buf.AvailableBuffer()
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, w.seq, 10)
	b = append(b, `,"time":"`...)
	b = w.now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = AppendJSONString(b, eventType)
	if w.iteration != 0 {
		b = append(b, `,"iteration":`...)
		b = strconv.AppendInt(b, int64(w.iteration), 10)
	}
	if w.step != "" {
		b = append(b, `,"step":`...)
		b = AppendJSONString(b, w.step)
	}
	b = append(b, `,"prev":"`...)
	b = append(b, w.prev[:w.prevLen]...)
	b = append(b, '"')
	if a, ok := data.(AppendJSONer); ok {
		if line := a.AppendJSON(append(b, `,"data":`...)); line != nil {
			b, data = line, nil
		}
	}
	buf.Write(b)
	if data != nil {
		buf.WriteString(`,"data":`)
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		mark := buf.Len()
		if err := enc.Encode(data); err != nil {
			buf.Truncate(mark)
			fmt.Fprintf(buf, `{"marshal_error":%q}`, err.Error())
		} else {
			buf.Truncate(buf.Len() - 1) // Encode's newline
		}
	}
	buf.WriteString("}\n")
	line := buf.Bytes()
	w.followPath()
	if _, err := w.f.Write(line); err != nil && w.err == nil {
		w.err = fmt.Errorf("journal: write %s: %w", w.path, err)
	}
	sum := sha256.Sum256(line[:len(line)-1])
	w.prevLen = hex.Encode(w.prev[:], sum[:16])
}

// AppendJSONer is a payload that encodes itself: AppendJSON appends
// exactly the bytes encoding/json's Encoder with SetEscapeHTML(false)
// writes for it (without the newline), or returns nil to leave the value
// to encoding/json. The payloads of the events every iteration writes
// have it, so the journal encodes them without reflection.
type AppendJSONer interface {
	AppendJSON(b []byte) []byte
}

// followPath makes sure the writer appends to the file at its path. A
// process that replaced the journal (renamed another file over it) or
// removed it while the run writes — a model's unsandboxed Bash can — would
// otherwise leave the writer appending to a file nobody reads, and the
// replacement, chained by its author, would read as the run's record. The
// writer appends to whatever is at the path now (creating it if needed):
// its next line chains to its own last one, so the hash chain of the file
// breaks there and readers, resume included, refuse the record; Err and
// Close report the swap.
func (w *Writer) followPath() {
	if w.stillThere() {
		return
	}
	w.noteSwap()
	// Never through a symbolic link: one put at the path would have the
	// writer append to whatever file it names. A journal made by Create
	// is found again by name in the run folder the writer holds, so a
	// link put in place of a folder on the path is not followed either.
	var f *os.File
	var err error
	if w.dir != nil {
		f, err = w.dir.OpenFile(filepath.Base(w.path), os.O_WRONLY|os.O_CREATE|os.O_APPEND|noFollow, 0o600)
	} else {
		f, err = os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|noFollow, 0o600)
	}
	if err != nil {
		return // the write goes to the old file; the error above stands
	}
	id, err := idOf(f)
	if err != nil {
		f.Close()
		return
	}
	_ = w.f.Close()
	w.f, w.opened = f, id
}

// noteSwap records that the journal's path no longer names the writer's
// file (Err and Close report it).
func (w *Writer) noteSwap() {
	if w.err == nil {
		w.err = fmt.Errorf("journal: %s was replaced or removed by another process while the run wrote it; the run's later events are appended to the file now there, whose hash chain breaks where they start: do not trust that record", w.path)
	}
}

// stillThere reports whether the journal's place still names the file
// the writer writes.
//
// Before every event it asks the open descriptor (fstat(2): no path
// lookup, no allocation) how many names the file has. That count drops to
// 0 when the journal is removed or another file is renamed over it — the
// ways a process replaces a file in place — so those are caught at the
// very next event, as the path check caught them. Two swaps leave the old
// file a name and so a count of 1: the journal renamed away (or linked
// elsewhere) and another file put at its path. Only a lookup of the path
// sees those, so the writer makes one when the count is anything but 1,
// at the first event of every new position (each iteration and step
// change) and when it closes: a swap of that kind is noticed within the
// iteration it happens in, and the events written to the old file before
// that are the run's own, still chained.
func (w *Writer) stillThere() bool {
	if n, err := linksOf(w.f); err == nil && n == 1 && !w.checkPath {
		return true
	}
	w.checkPath = false
	if w.dir != nil {
		fi, err := w.dir.Lstat(filepath.Base(w.path))
		cur, serr := w.f.Stat()
		return err == nil && serr == nil && os.SameFile(fi, cur)
	}
	id, err := pathID(w.path)
	return err == nil && id.same(w.opened)
}

// lineBuffers hold the lines being encoded, shared by every Writer: a
// Writer between events (an agent parked in a model call) keeps no buffer.
var lineBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledLine bounds the buffers kept for reuse (the pool is the
// process's, and the garbage collector empties it when idle): a tool
// output of a few MB is journaled without reallocating, a larger event
// does not stay pinned.
const maxPooledLine = 4 << 20

func putLineBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledLine {
		lineBuffers.Put(b)
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
	w.checkPath = true
	if !w.stillThere() {
		w.noteSwap()
	}
	syncErr := w.f.Sync()
	closeErr := w.f.Close()
	w.f = nil
	if w.dir != nil {
		closeErr = errors.Join(closeErr, w.dir.Close())
	}
	return errors.Join(w.err, syncErr, closeErr)
}

// AppendJSONString appends s as a JSON string exactly as encoding/json's
// Encoder with SetEscapeHTML(false) writes it: '"', '\\' and control
// characters escaped (\b \f \n \r \t by name, the others as \u00XX),
// invalid UTF-8 replaced by \ufffd, U+2028 and U+2029 escaped, the rest
// as is.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
