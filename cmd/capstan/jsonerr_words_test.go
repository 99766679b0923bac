package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// Read from the words, --json means what pflag makes of them: the last
// one given wins, and its value is a bool as strconv reads it.
func TestWantsJSONReadsTheWordsAsPflag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--json"}, true},
		{[]string{"--json=T"}, true},
		{[]string{"--json=1"}, true},
		{[]string{"--json=false"}, false},
		{[]string{"--json=false", "--json"}, true},
		{[]string{"--json", "--json=false"}, false},
		{[]string{"--", "--json"}, false},
		{[]string{"x", "--bogus"}, false},
	} {
		cmd := &cobra.Command{Use: "c"}
		cmd.Flags().Bool("json", false, "")
		if got := wantsJSON(cmd, c.args); got != c.want {
			t.Errorf("wantsJSON(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
