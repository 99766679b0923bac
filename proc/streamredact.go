package proc

import "strings"

// StreamRedactor replaces secret values in text that arrives in fragments,
// such as a model's streamed answer. A fragment may end inside a secret,
// so the longest tail that could begin one is held back until the next
// fragment (or Flush) decides. It is not safe for concurrent use; a nil
// StreamRedactor passes text through.
type StreamRedactor struct {
	secrets []string
	pending string
}

// NewStreamRedactor returns a StreamRedactor for the SecretValues of
// environ.
func NewStreamRedactor(environ []string) *StreamRedactor {
	return &StreamRedactor{secrets: sharedSecretValues(environ)}
}

// Text redacts a complete text (one that is not part of the stream).
func (r *StreamRedactor) Text(s string) string {
	if r == nil {
		return s
	}
	return replaceSecrets(s, r.secrets)
}

// Push takes the next fragment and returns what may be passed on now.
func (r *StreamRedactor) Push(fragment string) string {
	if r == nil {
		return fragment
	}
	buf := replaceSecrets(r.pending+fragment, r.secrets)
	hold := pieceAtEnd(buf, r.secrets)
	r.pending = buf[len(buf)-hold:]
	return buf[:len(buf)-hold]
}

// Flush returns the held-back tail: the text has ended, so it is no
// secret.
func (r *StreamRedactor) Flush() string {
	if r == nil {
		return ""
	}
	s := r.pending
	r.pending = ""
	return s
}

// Drop forgets the held-back tail (its text was discarded).
func (r *StreamRedactor) Drop() {
	if r != nil {
		r.pending = ""
	}
}

// pieceAtEnd is the length of the longest end of s that is the start,
// not the whole, of one of secrets.
func pieceAtEnd(s string, secrets []string) int {
	n := 0
	for _, v := range secrets {
		for k := min(len(v)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, v[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

// pieceAtStart is the length of the longest start of s that is the end,
// not the whole, of one of secrets.
func pieceAtStart(s string, secrets []string) int {
	n := 0
	for _, v := range secrets {
		for k := min(len(v)-1, len(s)); k > n; k-- {
			if strings.HasPrefix(s, v[len(v)-k:]) {
				n = k
				break
			}
		}
	}
	return n
}

// SecretPieceAtEnd is the number of bytes to cut from the end of s, text
// about to be cut off after it, so that it keeps no piece of one of
// secrets that redaction (which replaces whole values) would miss. The
// whole values in s are replaced first, as redaction will: a whole value
// at the end, whose last bytes may also start a value, is kept whole.
func SecretPieceAtEnd(s string, secrets []string) int {
	r := replaceSecrets(s, secrets)
	n := pieceAtEnd(r, secrets)
	if !strings.HasSuffix(s, r[len(r)-n:]) {
		// The piece runs into a replaced value (one that ends like a
		// secret starts): which bytes of s it is is not known, keep none.
		return len(s)
	}
	return n
}

// SecretPieceAtStart is SecretPieceAtEnd for text whose start was cut
// off: the number of bytes to cut from the start of s.
func SecretPieceAtStart(s string, secrets []string) int {
	r := replaceSecrets(s, secrets)
	n := pieceAtStart(r, secrets)
	if !strings.HasPrefix(s, r[:n]) {
		return len(s)
	}
	return n
}
