package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Integrity is what reading a journal found about its shape: a torn final
// line, lines that could not be read, and breaks in the hash chain.
type Integrity struct {
	// Lines is the number of non-empty lines read.
	Lines int `json:"lines"`
	// Unchained counts the leading events without a prev hash: written by
	// a capstan version that did not chain its events.
	Unchained int `json:"unchained,omitempty"`
	// Breaks are the lines whose prev does not match the line before
	// them: a line was edited, inserted or deleted.
	Breaks []Line `json:"chainBreaks,omitempty"`
	// Damaged are lines before the end that are not a whole event: a line
	// torn by a kill that an older capstan appended after. A damaged line
	// that ends with a whole event has that event recovered.
	Damaged []Line `json:"damaged,omitempty"`
	// TornTail is a final line without its newline, cut short by a kill.
	// It is not an event; Append moves it to the side file.
	TornTail *Line `json:"tornTail,omitempty"`
	// Size is the length of the journal up to the end of its last whole
	// line (where Append truncates a torn tail).
	Size int64  `json:"size"`
	last string // chain hash of the last whole line
}

// Line locates one line of a journal.
type Line struct {
	Line   int   `json:"line"`
	Offset int64 `json:"offset"`
	Bytes  int   `json:"bytes"`
	// Recovered is true for a damaged line whose trailing whole event was
	// read.
	Recovered bool `json:"recovered,omitempty"`
}

// ErrBrokenChain reports a journal whose hash chain does not hold.
var ErrBrokenChain = errors.New("hash chain broken")

// ErrDamaged reports a journal with an unreadable line before its end.
var ErrDamaged = errors.New("unreadable line")

// Err is nil when the journal can be trusted and continued: its chain
// holds and every line before the end is a whole event (or was recovered).
// A torn final line is not an error (Append repairs it).
func (in Integrity) Err() error {
	if len(in.Breaks) > 0 {
		b := in.Breaks[0]
		return fmt.Errorf("%w at line %d (%d break(s)): the journal was edited after it was written", ErrBrokenChain, b.Line, len(in.Breaks))
	}
	for _, d := range in.Damaged {
		if !d.Recovered {
			return fmt.Errorf("%w at line %d (%d bytes at offset %d)", ErrDamaged, d.Line, d.Bytes, d.Offset)
		}
	}
	return nil
}

// Notes describes, one sentence each, what a reader of the run should know
// about the journal: repairs, damage and chain breaks. Empty for a clean
// journal.
func (in Integrity) Notes() []string {
	var out []string
	for _, b := range in.Breaks {
		out = append(out, fmt.Sprintf("hash chain broken at line %d: the journal was edited after it was written; do not trust this record", b.Line))
	}
	for _, d := range in.Damaged {
		if d.Recovered {
			out = append(out, fmt.Sprintf("line %d began with %d bytes of a write cut short by a kill; the whole event after them was read", d.Line, d.Bytes))
		} else {
			out = append(out, fmt.Sprintf("line %d (%d bytes at offset %d) is not a whole event and was skipped", d.Line, d.Bytes, d.Offset))
		}
	}
	if t := in.TornTail; t != nil {
		out = append(out, fmt.Sprintf("the last line (%d bytes at offset %d) was cut short by a kill and is not an event; resume moves it to %s%s", t.Bytes, t.Offset, FileName, TornSuffix))
	}
	return out
}

// ReadFile reads a journal's events. It tolerates a torn final line and
// damaged lines (see ReadChecked for what was found).
func ReadFile(path string) ([]Event, error) {
	events, _, err := ReadChecked(path)
	return events, err
}

// ReadChecked reads a journal's events and checks its integrity. Events
// without a prev hash are accepted only at the start of a journal kept
// under <workdir>/.capstan/runs (written by an older capstan); in the
// state directory every event must be chained, so there an unchained
// first line is a chain break.
func ReadChecked(path string) ([]Event, Integrity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Integrity{}, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	events, in, err := Read(f, path)
	if err == nil && in.Unchained > 0 && !isLegacyPath(path) {
		in.Breaks = append([]Line{{Line: 1}}, in.Breaks...)
	}
	return events, in, err
}

// isLegacyPath reports whether path is <dir>/.capstan/runs/<id>/events.jsonl.
func isLegacyPath(path string) bool {
	runs := filepath.Dir(filepath.Dir(path))
	return filepath.Base(runs) == filepath.Base(RunsDir) && filepath.Base(filepath.Dir(runs)) == filepath.Dir(RunsDir)
}

// seqStart begins every event line capstan writes.
var seqStart = []byte(`{"seq":`)

// Read parses journal lines from r and checks the hash chain; name is used
// in error messages. Only a read failure is an error: torn, damaged and
// edited lines are reported in the Integrity.
func Read(r io.Reader, name string) ([]Event, Integrity, error) {
	br := bufio.NewReaderSize(r, 64*1024)
	var (
		events  []Event
		in      Integrity
		offset  int64
		lineNo  int
		chained bool
	)
	in.last = Genesis
	for {
		raw, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return events, in, fmt.Errorf("journal: read %s: %w", name, err)
		}
		if len(raw) > 0 {
			lineNo++
			at := Line{Line: lineNo, Offset: offset, Bytes: len(raw)}
			offset += int64(len(raw))
			if raw[len(raw)-1] != '\n' {
				// A write cut short: capstan's lines always end in a newline.
				if len(bytes.TrimSpace(raw)) > 0 {
					in.TornTail = &at
				}
				break
			}
			in.Size = offset
			body := bytes.TrimRight(raw, "\r\n")
			if len(bytes.TrimSpace(body)) > 0 {
				in.Lines++
				ev, evBytes, ok := parseLine(body)
				if !ok {
					in.Damaged = append(in.Damaged, at)
				} else {
					if len(evBytes) != len(body) {
						at.Bytes = len(body) - len(evBytes)
						at.Recovered = true
						in.Damaged = append(in.Damaged, at)
					}
					switch {
					case ev.Prev == "" && !chained:
						in.Unchained++
					case ev.Prev == "" || ev.Prev != in.last:
						in.Breaks = append(in.Breaks, Line{Line: lineNo, Offset: at.Offset, Bytes: len(body)})
						chained = true
					default:
						chained = true
					}
					in.last = LineHash(evBytes)
					events = append(events, ev)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return events, in, nil
}

// parseLine decodes one line. A line an older capstan wrote by appending
// after a torn write holds the torn bytes and then a whole event; that
// event (its bytes are returned) is recovered.
func parseLine(body []byte) (Event, []byte, bool) {
	var ev Event
	if json.Unmarshal(body, &ev) == nil {
		return ev, body, true
	}
	for i := bytes.LastIndex(body, seqStart); i > 0; i = bytes.LastIndex(body[:i], seqStart) {
		var rec Event
		if json.Unmarshal(body[i:], &rec) == nil {
			return rec, body[i:], true
		}
	}
	return Event{}, nil, false
}
