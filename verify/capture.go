package verify

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/proc"
)

// capture keeps what a command prints to one stream within limit bytes:
// the first half as it comes and the last half in a ring buffer, so the
// start of a run and its end (where test runners print failures and
// their summary) are both kept, and a command that prints without end
// holds limit bytes, no more. Both validator paths (unconfined and in the
// sandbox, whose RunStreams writes to it) capture through it.
type capture struct {
	head, tail           []byte
	headLimit, tailLimit int
	// next is where the next byte goes in tail once tail is full (its
	// oldest byte).
	next  int
	total int64
	// lineAfterHead: the byte after the head is a line break (the head
	// ends with a whole line); lineBeforeTail: the byte before the oldest
	// kept byte of tail is (tail starts with a whole line).
	lineAfterHead, lineBeforeTail bool
	pastHead                      bool // a byte was written past the head
	// secrets are the secret values (proc.SecretValues) whose pieces
	// must not survive where the kept parts are cut.
	secrets []string
}

func newCapture(limit int, secrets []string) *capture {
	h := limit / 2
	return &capture{headLimit: h, tailLimit: limit - h, secrets: secrets}
}

func (w *capture) Write(p []byte) (int, error) {
	n := len(p)
	w.total += int64(n)
	if room := w.headLimit - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 && !w.pastHead {
		w.pastHead, w.lineAfterHead = true, p[0] == '\n'
	}
	switch {
	case len(p) == 0 || w.tailLimit == 0:
	case len(p) >= w.tailLimit:
		if len(p) > w.tailLimit {
			w.lineBeforeTail = p[len(p)-w.tailLimit-1] == '\n'
		} else if len(w.tail) > 0 {
			w.lineBeforeTail = w.tail[(w.next+len(w.tail)-1)%len(w.tail)] == '\n'
		} else {
			w.lineBeforeTail = len(w.head) == 0 || w.head[len(w.head)-1] == '\n'
		}
		w.tail = append(w.tail[:0], p[len(p)-w.tailLimit:]...)
		w.next = 0
	default:
		if room := w.tailLimit - len(w.tail); room > 0 {
			k := min(room, len(p))
			w.tail = append(w.tail, p[:k]...)
			p = p[k:]
		}
		for len(p) > 0 {
			k := min(len(w.tail)-w.next, len(p))
			w.lineBeforeTail = w.tail[w.next+k-1] == '\n' // the last byte evicted
			copy(w.tail[w.next:], p[:k])
			w.next = (w.next + k) % w.tailLimit
			p = p[k:]
		}
	}
	return n, nil
}

// omitted is the number of bytes written and not kept.
func (w *capture) omitted() int64 { return w.total - int64(len(w.head)+len(w.tail)) }

// truncated reports whether bytes were left out. It is the capture's own
// count, never read from the text, which the command controls.
func (w *capture) truncated() bool { return w.omitted() > 0 }

// String is the kept output. When bytes were left out it is the start and
// the end, each cut to whole lines when it holds a line break and with
// no piece of a secret value at either cut, joined by the line
// truncationNote says. Text the command printed that starts like one of
// capstan's notes ("[capstan:") is marked as not capstan's (notCapstan),
// so a fake note cannot pass for the real one.
func (w *capture) String() string {
	tail := make([]byte, 0, len(w.tail))
	tail = append(append(tail, w.tail[w.next:]...), w.tail[:w.next]...)
	if !w.truncated() {
		return notCapstan(string(w.head) + string(tail))
	}
	head := w.head
	head = head[:len(head)-proc.SecretPieceAtEnd(string(head), w.secrets)]
	tail = tail[proc.SecretPieceAtStart(string(tail), w.secrets):]
	if cut := len(head) < len(w.head) || !w.lineAfterHead; cut {
		if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
			head = head[:i+1]
		}
	}
	if cut := len(tail) < len(w.tail) || !w.lineBeforeTail; cut {
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
	}
	omitted := w.total - int64(len(head)+len(tail))
	var b strings.Builder
	b.WriteString(notCapstan(string(head)))
	if len(head) > 0 && head[len(head)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString(truncationNote(omitted))
	b.WriteByte('\n')
	b.WriteString(notCapstan(string(tail)))
	return b.String()
}

// truncationNote is the line that stands for the bytes a capture left
// out. It names no test outcome, so no test runner's parser reads it.
func truncationNote(omitted int64) string {
	return fmt.Sprintf("[capstan: output truncated, %d bytes omitted here]", omitted)
}

// notCapstan marks text a command printed that reads like one of
// capstan's notes: "[capstan:" becomes "[not capstan:".
func notCapstan(s string) string {
	return strings.ReplaceAll(s, "[capstan:", "[not capstan:")
}
