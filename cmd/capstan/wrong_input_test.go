package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/journal"
)

// helloPath is the hello example's folder, absolute.
func helloPath(t *testing.T) string {
	t.Helper()
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	return hello
}

// runHello runs the hello example in the new work dir w with flags added
// (through sh, in its directory) and returns the run's id and journal,
// failing the test unless it exits with want.
func runHello(t *testing.T, sh func(string) (int, string), flags string, want int) (id, journalPath string) {
	t.Helper()
	code, out := sh("mkdir w && capstan run " + shellQuote(helloPath(t)) + " --workdir w -q --json " + flags)
	var res struct{ RunID, Journal string }
	if code != want || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("run: exit %d, want %d\n%s", code, want, out)
	}
	return res.RunID, res.Journal
}

// A run id that names no run is RUN_NOT_FOUND for every command that
// takes one: the message says which id and where capstan looked, and the
// hint's command, pasted, lists the runs. A prefix of several runs' ids
// is RUN_AMBIGUOUS, naming them.
func TestUnknownRunIDIsCoded(t *testing.T) {
	dir := t.TempDir()
	sh := pasteShell(t, dir)
	for _, command := range []string{"show", "report", "resume", "approve", "reject"} {
		code, out := sh("capstan " + command + " NOPE")
		if code != exitUsage || !strings.Contains(out, `capstan: RUN_NOT_FOUND: no run "NOPE" in `) ||
			!strings.Contains(out, filepath.Join(dir, ".capstan", "runs")) || strings.Contains(out, "journal:") {
			t.Errorf("capstan %s NOPE: exit %d\n%s", command, code, out)
		}
		if c, listed := sh(pastedCommand(t, out, "list the runs with: ")); c != 0 {
			t.Errorf("the pasted hint of capstan %s NOPE: exit %d\n%s", command, c, listed)
		}
	}
	code, out := sh("capstan show NOPE --json")
	var got struct{ Error struct{ Code, Hint string } }
	if code != exitUsage || json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &got) != nil || got.Error.Code != "RUN_NOT_FOUND" || got.Error.Hint == "" {
		t.Errorf("--json: exit %d\n%s", code, out)
	}
	hello := helloPath(t)
	// Two runs in a state directory of their own: both ids start with
	// the year.
	own := "CAPSTAN_STATE_DIR=" + shellQuote(t.TempDir()) + " "
	for range 2 {
		if code, out := sh("mkdir -p w && " + own + "capstan run " + shellQuote(hello) + " --workdir w -q"); code != 0 {
			t.Fatalf("run: exit %d\n%s", code, out)
		}
	}
	code, out = sh(own + "capstan show 2")
	if code != exitUsage || !strings.Contains(out, `capstan: RUN_AMBIGUOUS: run id "2" starts 2 runs' ids: `) {
		t.Errorf("ambiguous id: exit %d\n%s", code, out)
	}
}

// A report that cannot be written where -o says is a coded usage error
// before anything is written, and the command in its hint, pasted,
// writes the report: -o naming a directory, a directory that does not
// exist, a path under a file, a place no file can be created.
func TestReportOutputErrorsHaveWorkingHints(t *testing.T) {
	dir := t.TempDir()
	sh := pasteShell(t, dir)
	var res struct{ RunID string }
	res.RunID, _ = runHello(t, sh, "", 0)
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ output, says, hint, writes string }{
		{"out", "-o out: it is a directory", "write it into that directory: ", "out/report-" + res.RunID + ".md"},
		{"new/r.md", "-o new/r.md: the directory new does not exist", "create the directory first: ", "new/r.md"},
		{"afile/r.md", "-o afile/r.md: afile is a file, not a directory", "write it elsewhere: ", "report-" + res.RunID + ".md"},
		{"/proc/r.md", "-o /proc/r.md: cannot create a file there", "write it elsewhere: ", "report-" + res.RunID + ".md"},
	} {
		code, out := sh("capstan report " + res.RunID + " --format md -o " + c.output)
		if code != exitUsage || !strings.Contains(out, "capstan: USAGE: "+c.says) {
			t.Errorf("-o %s: exit %d, want %q:\n%s", c.output, code, c.says, out)
			continue
		}
		if code, pasted := sh(pastedCommand(t, out, c.hint)); code != 0 || !strings.Contains(pasted, "wrote "+c.writes) {
			t.Errorf("-o %s: the pasted hint exited %d, want it to write %s:\n%s", c.output, code, c.writes, pasted)
		}
		os.Remove(filepath.Join(dir, "report-"+res.RunID+".md"))
	}
}

// cobra's own errors (an unknown flag, a wrong number of arguments) and
// the usage errors without a code of their own print the code --json
// names, USAGE; cobra's hint, pasted, shows the command's help.
func TestUsageErrorsPrintTheirCode(t *testing.T) {
	sh := pasteShell(t, t.TempDir())
	for _, line := range []string{"capstan show", "capstan runs --bogus", "capstan runs --limit x", "capstan fix", "capstan run"} {
		code, out := sh(line)
		if code != exitUsage || !strings.HasPrefix(out, "capstan: USAGE: ") {
			t.Errorf("%s: exit %d, want capstan: USAGE: …\n%s", line, code, out)
		}
		if strings.Contains(out, "hint: see its arguments and flags with: ") {
			if code, help := sh(pastedCommand(t, out, "see its arguments and flags with: ")); code != 0 || !strings.Contains(help, "Usage:") {
				t.Errorf("%s: the pasted hint exited %d:\n%s", line, code, help)
			}
		}
	}
}

// A negative count or duration given to run is refused before anything
// runs, naming the flag (it was passed on as a Go field's name, or
// accepted and ignored); an agent.json named instead of its folder is
// said to be a file, with the folder to pass.
func TestRunRefusesWhatNoRunCanUse(t *testing.T) {
	dir := t.TempDir()
	sh := pasteShell(t, dir)
	hello := helloPath(t)
	for _, c := range []struct{ flags, says string }{
		{"--max-iterations -1", "capstan: USAGE: --max-iterations -1 is negative"},
		{"--connect-timeout -5s", "capstan: USAGE: --connect-timeout -5s is negative"},
		{"--max-retry-after=-1m", "capstan: USAGE: --max-retry-after -1m0s is negative"},
	} {
		if code, out := sh("capstan run " + shellQuote(hello) + " --workdir . -q " + c.flags); code != exitUsage || !strings.Contains(out, c.says) || strings.Contains(out, "agent.Config") {
			t.Errorf("%s: exit %d, want %q:\n%s", c.flags, code, c.says, out)
		}
	}
	file := filepath.Join(hello, "agent.json")
	for _, line := range []string{"capstan validate " + shellQuote(file), "capstan run " + shellQuote(file) + " --workdir ."} {
		code, out := sh(line)
		if code != exitUsage || !strings.Contains(out, "is a file, not a folder") || !strings.Contains(out, "pass the folder that holds it: "+hello) || strings.Contains(out, "open .") {
			t.Errorf("%s: exit %d\n%s", line, code, out)
		}
	}
}

// A journal a newer capstan wrote (its run.start names a format above
// journal.Format) is shown with a warning that says so, and not resumed
// or decided: the refusal is coded, and its hint's command, pasted, shows
// the run.
func TestNewerJournalIsShownNotResumed(t *testing.T) {
	dir := t.TempDir()
	sh := pasteShell(t, dir)
	var res struct{ RunID, Journal string }
	res.RunID, res.Journal = runHello(t, sh, "--max-iterations 1", exitNotCompleted)
	b, err := os.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	// The run.start of a newer format, the hash chain made again over it.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	lines[0] = strings.Replace(lines[0], fmt.Sprintf(`"format":%d`, journal.Format), fmt.Sprintf(`"format":%d`, journal.Format+1), 1)
	prevField := regexp.MustCompile(`"prev":"[0-9a-f]+"`)
	for i := 1; i < len(lines); i++ {
		lines[i] = prevField.ReplaceAllLiteralString(lines[i], `"prev":"`+journal.LineHash([]byte(lines[i-1]))+`"`)
	}
	if err := os.WriteFile(res.Journal, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := sh("capstan show " + res.RunID); code != 0 || !strings.Contains(out, "written by a newer capstan") || strings.Contains(out, "hash chain") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	for _, command := range []string{"resume", "approve"} {
		code, out := sh("capstan " + command + " " + res.RunID)
		if code != exitUsage || !strings.Contains(out, "capstan: USAGE: run "+res.RunID+" was written by a newer capstan") {
			t.Errorf("%s: exit %d\n%s", command, code, out)
			continue
		}
		if code, shown := sh(pastedCommand(t, out, "see what it did with: ")); code != 0 {
			t.Errorf("%s: the pasted hint exited %d\n%s", command, code, shown)
		}
	}
}

// capstan fix refuses an empty task before anything else (it was told of
// git's identity first), and --print-agent onto a file, a folder that is
// not empty or a place no folder can be created is a coded usage error
// (it named a temporary folder) whose hint, pasted, writes the agent.
func TestFixRefusesAnEmptyTaskAndABadPrintAgent(t *testing.T) {
	repo, _ := fixRepo(t, "go")
	sh := pasteShell(t, repo)
	if code, out := sh("capstan fix '' --workdir ."); code != exitUsage || !strings.Contains(out, "capstan: USAGE: fix: the task is empty") {
		t.Errorf("empty task: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(repo, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ to, says string }{
		{"afile", "afile is a file"},
		{".", ". is not empty"},
		{"/proc/agent", "cannot create a folder in /proc"},
	} {
		code, out := sh("capstan fix 'make the failing tests pass' --print-agent " + c.to)
		if code != exitUsage || !strings.Contains(out, "capstan: USAGE: fix: --print-agent "+c.to+": write agent folder: "+c.says) || strings.Contains(out, ".tmp-") {
			t.Errorf("--print-agent %s: exit %d\n%s", c.to, code, out)
			continue
		}
		if code, wrote := sh(pastedCommand(t, out, "name a new directory: ")); code != 0 || !strings.Contains(wrote, "wrote the agent to fix-agent") {
			t.Errorf("--print-agent %s: the pasted hint exited %d\n%s", c.to, code, wrote)
		}
		os.RemoveAll(filepath.Join(repo, "fix-agent"))
	}
}

// capstan init into a --dir that does not exist, or that is a file, says
// which, and the command in its hint, pasted, creates the agent.
func TestInitDirHintsWork(t *testing.T) {
	dir := t.TempDir()
	sh := pasteShell(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, says, hint, created string }{
		{"'no such/dir'", `--dir "no such/dir" is not an existing folder`, "create it first: ", "created no such/dir/demo"},
		{"afile", `--dir "afile" is a file, not a folder`, "create the agent here instead: ", "created demo"},
	} {
		code, out := sh("capstan init demo --dir " + c.dir)
		if code != exitUsage || !strings.Contains(out, c.says) {
			t.Errorf("--dir %s: exit %d\n%s", c.dir, code, out)
			continue
		}
		if code, made := sh(pastedCommand(t, out, c.hint)); code != 0 || !strings.Contains(made, c.created) {
			t.Errorf("--dir %s: the pasted hint exited %d\n%s", c.dir, code, made)
		}
	}
}

// An agent.json or steps registry that is a directory is said to be one
// (it was "not a regular file of at most 8388608 bytes").
func TestConfigFileThatIsADirectory(t *testing.T) {
	dir := scaffold(t)
	reg := filepath.Join(dir, "steps_registry.json")
	if err := os.Remove(reg); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(reg, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != exitUsage || !strings.Contains(out, "CONFIG_PARSE steps_registry.json is a directory, not a file") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// A run whose journal has a damaged line is not resumed, and the command
// its refusal prints, pasted, starts the agent anew in the same work dir.
func TestDamagedJournalNamesTheRunToStart(t *testing.T) {
	dir := t.TempDir()
	sh := pasteShell(t, dir)
	var res struct{ RunID, Journal string }
	res.RunID, res.Journal = runHello(t, sh, "--max-iterations 1", exitNotCompleted)
	f, err := os.OpenFile(res.Journal, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("garbage{\n")
	f.Close()
	code, out := sh("capstan resume " + res.RunID)
	if code != exitInternal || !strings.Contains(out, "unreadable line") {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if code, again := sh(pastedCommand(t, out, "start a new run with: ")); code != 0 {
		t.Errorf("the pasted command exited %d\n%s", code, again)
	}
}
