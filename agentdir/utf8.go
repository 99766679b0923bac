package agentdir

import (
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agenterr"
)

// checkUTF8 refuses a configuration file that is not valid UTF-8. JSON
// must be UTF-8, and encoding/json would silently turn every invalid byte
// into U+FFFD, so a name, a command or a pattern would differ from what
// the file says. The error points at the first invalid byte.
func checkUTF8(src *source) error {
	if utf8.Valid(src.raw) {
		return nil
	}
	off := 0
	for off < len(src.raw) {
		r, size := utf8.DecodeRune(src.raw[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	e := agenterr.New(agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false,
		"%s is not valid UTF-8 (byte 0x%02x at offset %d)", src.file, src.raw[off], off)
	e.File = src.file
	e.Line, e.Column = src.position(off)
	e.Hint = "save the file as UTF-8; write other characters as \\uXXXX escapes"
	return e
}
