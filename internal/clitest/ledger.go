package clitest

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// LedgerTrials is how many kills a tool-effect ledger test lands
// (CAPSTAN_LEDGER_TRIALS overrides the 50).
func LedgerTrials(t testing.TB) int {
	if v := os.Getenv("CAPSTAN_LEDGER_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CAPSTAN_LEDGER_TRIALS=%q is not a positive number", v)
		}
		return n
	}
	return 50
}

// BashCallState reads iteration 1 of a journal: whether the Bash call was
// journaled as an intent, whether its result was recorded, and whether
// the model was told that it was interrupted (a result saying so).
func BashCallState(t testing.TB, path string) (intent, recorded, told bool) {
	t.Helper()
	events, _, err := journal.ReadChecked(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Iteration != 1 {
			continue
		}
		switch ev.Type {
		case journal.ToolIntent:
			intent = true
		case journal.ToolCall:
			var u event.ToolUse
			if json.Unmarshal(ev.Data, &u) == nil && u.Name == "Bash" {
				if strings.HasPrefix(u.Output, "not run again: an earlier attempt of this Bash call") {
					told = true
				} else if !u.Replayed {
					recorded = true
				}
			}
		}
	}
	return intent, recorded, told
}

// InterruptedLine is the line ("line-N") that the Bash call the ledger
// reported as interrupted in the journal at path was to append, or "".
func InterruptedLine(t testing.TB, path string) string {
	t.Helper()
	events, _, err := journal.ReadChecked(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		var u event.ToolUse
		if ev.Type == journal.ToolCall && json.Unmarshal(ev.Data, &u) == nil && strings.HasPrefix(u.Output, "not run again: an earlier attempt of this ") {
			if m := regexp.MustCompile(`line-[0-9]+`).FindString(string(u.Input)); m != "" {
				return m
			}
			t.Fatalf("the interrupted call's input names no line: %s", u.Input)
		}
	}
	return ""
}

// CountLines is the number of lines of the file at p (0 when it does not
// exist).
func CountLines(t testing.TB, p string) int {
	t.Helper()
	data, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}
