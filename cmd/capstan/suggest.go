package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError rewrites a flag parsing error of fs in the flag's own words:
// an unknown flag gets the nearest flag fs has ("did you mean --model?"),
// a value that does not parse says what the flag wants instead of
// strconv's or time's words.
func flagError(fs *pflag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if m := unknownFlagText.FindStringSubmatch(msg); m != nil {
		if near := nearestFlag(fs, m[1]); near != "" {
			return fmt.Errorf("%s; did you mean --%s?", msg, near)
		}
		return err
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		want := "a valid value"
		switch {
		case strings.Contains(m[3], "ParseInt"), strings.Contains(m[3], "ParseUint"):
			want = "a whole number, such as 5"
		case strings.Contains(m[3], "ParseFloat"):
			want = "a number, such as 0.5"
		case strings.Contains(m[3], "ParseBool"):
			want = "true or false"
		case strings.Contains(m[3], "duration"):
			want = "a duration, such as 30s, 2m or 1h30m"
		}
		return fmt.Errorf("%s wants %s, not %q", m[2], want, m[1])
	}
	return err
}

var (
	unknownFlagText = regexp.MustCompile(`unknown flag: --([^\s=]+)`)
	badValue        = regexp.MustCompile(`invalid argument "(.*)" for "(-[^"]+)" flag: (.*)$`)
)

// nearestFlag is the flag of fs closest to name (at most 2 edits, or
// name a prefix of it), "" when none is.
func nearestFlag(fs *pflag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return nearestWord(name, names)
}

// nearestWord is the word of words closest to name (at most 2 edits, or
// name a prefix of it), "" when none is.
func nearestWord(name string, words []string) string {
	best, bestD := "", 3
	for _, w := range words {
		d := editDistance(name, w)
		if strings.HasPrefix(w, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = w, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// noSubcommand refuses an argument of the root command: an unknown
// command, with the commands it may have meant.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return withExit(exitUsage, errors.New(msg+" (see capstan --help)"))
}
