package verify

import (
	"errors"
	"fmt"
	"github.com/capstan-dev/capstan/event"
	"regexp"
	"strconv"
	"strings"
)

// SuccessWhen is a parsed successWhen rule.
type SuccessWhen struct {
	// Kind is "empty", "exitCode", "contains" or "matches".
	Kind     string
	ExitCode int
	Text     string
	Regexp   *regexp.Regexp
}

// ParseSuccessWhen parses a validator's successWhen: "empty" (trimmed
// stdout is empty and the exit code is 0), "exitCode:N" (N in 0..255),
// "contains:TEXT" (stdout contains TEXT), "matches:REGEXP" (stdout
// matches, Go RE2 syntax). "" means "exitCode:0". NewCompletionValidator
// parses every validator's successWhen with it (SR-SUCCESS-WHEN).
func ParseSuccessWhen(s string) (SuccessWhen, error) {
	if s == "" {
		return SuccessWhen{Kind: "exitCode"}, nil
	}
	if s == "empty" {
		return SuccessWhen{Kind: "empty"}, nil
	}
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		return SuccessWhen{}, fmt.Errorf("successWhen %q: want empty, exitCode:N, contains:TEXT or matches:REGEXP", s)
	}
	switch kind {
	case "exitCode":
		n, err := strconv.Atoi(strings.TrimSpace(arg))
		if err != nil || n < 0 || n > 255 {
			return SuccessWhen{}, fmt.Errorf("successWhen %q: exit code must be an integer 0..255", s)
		}
		return SuccessWhen{Kind: kind, ExitCode: n}, nil
	case "contains":
		if arg == "" {
			return SuccessWhen{}, fmt.Errorf("successWhen %q: contains needs text", s)
		}
		return SuccessWhen{Kind: kind, Text: arg}, nil
	case "matches":
		re, err := regexp.Compile(arg)
		if err != nil || arg == "" {
			if err == nil {
				err = errors.New("empty expression")
			}
			return SuccessWhen{}, fmt.Errorf("successWhen %q: %v", s, err)
		}
		return SuccessWhen{Kind: kind, Text: arg, Regexp: re}, nil
	}
	return SuccessWhen{}, fmt.Errorf("successWhen %q: unknown condition %q; want empty, exitCode:N, contains:TEXT or matches:REGEXP", s, kind)
}

// Met reports whether out satisfies the rule. A timed-out command never
// does.
func (w SuccessWhen) Met(out event.ValidatorOutput) bool {
	if out.TimedOut {
		return false
	}
	switch w.Kind {
	case "empty":
		return out.ExitCode == 0 && strings.TrimSpace(out.Stdout) == ""
	case "exitCode":
		return out.ExitCode == w.ExitCode
	case "contains":
		return strings.Contains(out.Stdout, w.Text)
	case "matches":
		return w.Regexp != nil && w.Regexp.MatchString(out.Stdout)
	}
	return false
}
