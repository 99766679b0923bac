package verify

import (
	"strings"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"
)

// OutputExcerptBytes bounds the excerpt of a failing validator's output
// that its validator.result event keeps: the end of what it printed,
// where a test runner says what failed.
const OutputExcerptBytes = 4 << 10

// OutputExcerpt returns the end of a validator's output for the journal:
// stdout then stderr, joined as the extractors join them, with secret
// values redacted (proc.RedactSecrets) before it is cut, so no part of
// a secret survives at the cut. The excerpt is valid UTF-8 of at most
// OutputExcerptBytes bytes; when the output is longer it starts at a line
// if one begins in its first quarter. omitted is the number of bytes of
// the (redacted) output before the excerpt.
func OutputExcerpt(out event.ValidatorOutput) (excerpt string, omitted int) {
	text := proc.RedactSecrets(JoinedOutput(out))
	if len(text) <= OutputExcerptBytes && utf8.ValidString(text) {
		return text, 0
	}
	// Walk back from the end, a rune at a time, while the excerpt stays
	// within the bound; an invalid byte counts as the replacement
	// character it becomes (3 bytes).
	cut, size := len(text), 0
	for cut > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:cut])
		w := n
		if r == utf8.RuneError && n == 1 {
			w = len("\uFFFD")
		}
		if size+w > OutputExcerptBytes {
			break
		}
		size, cut = size+w, cut-n
	}
	if cut > 0 {
		if nl := strings.IndexByte(text[cut:], '\n'); nl >= 0 && nl < OutputExcerptBytes/4 {
			cut += nl + 1
		}
	}
	return strings.ToValidUTF8(text[cut:], "\uFFFD"), cut
}
