package sandbox

import (
	"os"
	"strings"
	"testing"
)

// Every Status is a row of the one table of the "Results" section of
// docs/sandbox.md, and the table names no other status: a row stranded
// after the table's prose renders as text, not as part of the table.
func TestResultStatusesAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/sandbox.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Results\n")
	if !ok {
		t.Fatal("docs/sandbox.md has no Results section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var tables [][]string
	inTable := false
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable {
			tables = append(tables, nil)
			inTable = true
		}
		tables[len(tables)-1] = append(tables[len(tables)-1], line)
	}
	if len(tables) != 1 {
		t.Fatalf("the Results section has %d tables (or stray rows), want 1: %q", len(tables), tables)
	}
	rows := map[string]bool{}
	for _, line := range tables[0] {
		cells := strings.Split(line, "|")
		if len(cells) > 2 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = true
		}
	}
	statuses := []Status{StatusOK, StatusExit, StatusTimeout, StatusCPULimit, StatusMemoryLimit, StatusDiskLimit,
		StatusProcessLimit, StatusFileTooLarge, StatusOutputLimit, StatusKilled, StatusSandboxError}
	for _, s := range statuses {
		if !rows[string(s)] {
			t.Errorf("status %s has no row in the Results table", s)
		}
		delete(rows, string(s))
	}
	for r := range rows {
		t.Errorf("the Results table names %s, which is no Status", r)
	}
}
