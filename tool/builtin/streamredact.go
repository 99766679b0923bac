package builtin

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
	hold := 0
	for _, v := range r.secrets {
		for n := min(len(v)-1, len(buf)); n > hold; n-- {
			if strings.HasSuffix(buf, v[:n]) {
				hold = n
				break
			}
		}
	}
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
