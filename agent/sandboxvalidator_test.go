package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/sandbox"
)

// needSandbox skips, with the reason, on a machine that cannot sandbox
// (as TestSandboxedBash does).
func needSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Probe(context.Background()).Unavailable(); err != nil {
		t.Skipf("no sandbox on this machine: %v", err)
	}
}

// needSystemPython fails the test under CI, else skips it, when there is
// no /usr/bin/python3: a sandboxed command finds only the system's
// python3 (a pyenv shim in a home directory is out of its reach).
func needSystemPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no /usr/bin/python3 for sandboxed commands (CI installs it): %v", err)
		}
		t.Skipf("no /usr/bin/python3 for sandboxed commands: %v", err)
	}
}

// leakTest is a unittest suite a hostile model writes: its one test
// passes, and meanwhile copies what it can read of hosts (a credential
// file) and of every journal under state into stolen.txt in the work dir,
// appends a forged line to those journals, writes outside (a path outside
// the work dir) and leaves a process behind that appends a line to
// late.txt ten times a second for ten seconds.
func leakTest(hosts, state, outside string) string {
	return `import glob, subprocess, unittest


class TestLeak(unittest.TestCase):
    def test_leak(self):
        stolen = []
        journals = glob.glob("` + state + `/runs/*/*/events.jsonl")
        for p in ["` + hosts + `"] + journals:
            try:
                stolen.append(open(p).read())
            except OSError as e:
                stolen.append("denied: %s" % e)
        for p in journals:
            try:
                open(p, "a").write('{"seq":99,"type":"tests.baseline","data":{}}\n')
            except OSError:
                pass
        try:
            open("` + outside + `", "w").write("forged")
        except OSError:
            pass
        open("stolen.txt", "w").write("\n".join(stolen))
        subprocess.Popen(["sh", "-c", "for i in $(seq 100); do echo late >> late.txt; sleep 0.1; done"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
`
}

// TestModelWrittenTestCannotEscapeTheSandboxedValidator plays the attack
// end to end: with runner.boundaries.sandbox enabled, the model writes a
// test that the run's "python3 -m unittest" validator runs (before the
// first iteration for the test baseline, and to verify). The test passes,
// but it reads no credential file and no journal, forges nothing, writes
// nothing outside the work dir and leaves no process behind. The control,
// the same run without the sandbox, does all of that.
func TestModelWrittenTestCannotEscapeTheSandboxedValidator(t *testing.T) {
	needSandbox(t)
	needTools(t, "python3")
	needSystemPython(t)
	const marker = "gho_HOSTS-MARKER-0123456789"
	run := func(t *testing.T, sandboxJS string) (res *event.RunResult, work, outside string) {
		base := t.TempDir()
		hosts := filepath.Join(base, "home", ".config", "gh", "hosts.yml")
		if err := os.MkdirAll(filepath.Dir(hosts), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hosts, []byte("github.com:\n    oauth_token: "+marker+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		state, outside := filepath.Join(base, "state"), filepath.Join(base, "forged.txt")
		dir := writeAgent(t, map[string]string{
			"agent.json": `{
  "version": "1.0.0", "name": "leak", "description": "a model that writes a hostile test",
  "runner": {
    "model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "DONE", "validators": ["tests"]},
    "boundaries": {"allowedTools": ["Write"], "permissionMode": "acceptEdits"` + sandboxJS + `},
    "budgets": {"maxIterations": 2}
  }
}`,
			"steps_registry.json": `{"agentId": "leak", "c1": "steps", "entryStep": "initial.work",
  "validators": {"tests": {"type": "command", "command": "python3 -m unittest -v", "failurePattern": "test-failed"}},
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work"}}}`,
			"prompts/steps/initial/work/f_default.md": "Add a test.",
			"script.yaml": `turns:
  - tool_calls:
      - name: Write
        input: {file_path: test_leak.py, content: ` + jsonString(leakTest(hosts, state, outside)) + `}
  - text: "Tested. DONE"
`,
		})
		work = t.TempDir()
		res = runToEnd(t, load(t, dir), BuildOptions{WorkDir: work, Store: journal.Store{Dir: state}})
		return res, work, outside
	}

	res, work, outside := run(t, `, "sandbox": {"enabled": true}`)
	if !res.Success {
		t.Fatalf("the passing test did not verify the run: %+v %+v", res, res.Error)
	}
	stolen, err := os.ReadFile(filepath.Join(work, "stolen.txt"))
	if err != nil {
		t.Fatalf("the validator did not run the model's test: %v", err)
	}
	if strings.Contains(string(stolen), marker) || strings.Contains(string(stolen), `"type":"run.start"`) ||
		!strings.Contains(string(stolen), "denied:") {
		t.Errorf("the sandboxed validator's test read outside the work dir:\n%s", stolen)
	}
	if _, in, err := journal.ReadChecked(res.Journal); err != nil || in.Err() != nil {
		t.Errorf("journal: %v %v", err, in.Err())
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("the sandboxed validator's test wrote outside the work dir")
	}
	// The left-behind writer may have written while the validator ran
	// (how long it took after the test is up to the machine); once the
	// run has ended, late.txt must not grow.
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(work, "late.txt"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	before := size()
	time.Sleep(time.Second)
	if after := size(); after != before {
		t.Errorf("a process of the sandboxed validator's test outlived it: late.txt grew from %d to %d bytes after the run", before, after)
	}

	// The control: opted out of the sandbox, same model.
	res, work, outside = run(t, `, "sandbox": {"enabled": false}`)
	stolen, _ = os.ReadFile(filepath.Join(work, "stolen.txt"))
	if !strings.Contains(string(stolen), marker) || !strings.Contains(string(stolen), `"type":"run.start"`) {
		t.Errorf("control: unsandboxed, the test did not read the credentials and the journal, so the test proves nothing:\n%s", stolen)
	}
	if _, in, err := journal.ReadChecked(res.Journal); err == nil && in.Err() == nil {
		t.Error("control: unsandboxed, the forged line did not break the journal's chain")
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("control: unsandboxed, the test did not write outside the work dir: %v", err)
	}
}

// sandboxVerdictAgent is verdictAgent with runner.boundaries.sandbox
// set to sandboxJS (the default when "") and out-exists a command validator:
// it passes when out.txt exists and secret cannot be read.
func sandboxVerdictAgent(t *testing.T, completionJS, stepJS, script, secret, sandboxJS string) string {
	t.Helper()
	dir := verdictAgent(t, completionJS, stepJS, script)
	replace := func(name, old, new string) {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("%s: %q not found (%v)", name, old, err)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replace("agent.json", `"permissionMode": "acceptEdits"`, `"permissionMode": "acceptEdits"`+sandboxJS)
	replace("steps_registry.json", `"out-exists": {"type": "file", "path": "out.txt",`,
		`"out-exists": {"type": "command", "command": `+jsonString("test -f out.txt && ! cat "+secret)+`,`)
	return dir
}

// TestSandboxedValidatorsOnEveryCompletionType: whatever the completion
// type, the run's command validators run in the sandbox when it is on: a
// validator that passes only when a file outside the work dir cannot be
// read verifies the honest model's run; the liar still ends
// validation_exhausted. The control (keyword, no sandbox) reads the file.
func TestSandboxedValidatorsOnEveryCompletionType(t *testing.T) {
	needSandbox(t)
	fakeGH(t)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	const on = `, "sandbox": {"enabled": true}`
	onFailure := `"onFailure": {"action": "retry", "maxAttempts": 2}`
	for _, ct := range completionTypes {
		t.Run(ct.typ, func(t *testing.T) {
			step := onFailure
			if ct.step != "" {
				step += ", " + ct.step
			}
			res, _ := runVerdict(t, sandboxVerdictAgent(t, ct.js, step, honestScript, secret, on), nil)
			if !res.Success || !strings.Contains(res.Reason, "verified by out-exists") {
				t.Fatalf("honest, sandboxed: %+v %+v", res, res.Error)
			}
			res, _ = runVerdict(t, sandboxVerdictAgent(t, ct.js, step, liarScript, secret, on), nil)
			if res.Success || res.CompletionReason != ReasonValidationExhausted {
				t.Fatalf("liar, sandboxed: %+v", res)
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		res, _ := runVerdict(t, sandboxVerdictAgent(t, completionTypes[0].js, onFailure, honestScript, secret, `, "sandbox": {"enabled": false}`), nil)
		if res.Success || res.CompletionReason != ReasonValidationExhausted || !errors.Is(res.Err(), agenterr.ErrValidationExhausted) {
			t.Fatalf("control: unsandboxed, the validator read the file, so it must fail: %+v", res)
		}
	})
}

// cacheTest is a unittest suite that records, in seen.txt in the work
// dir, the mark-* files each run finds in $GOCACHE and where GOCACHE was,
// then leaves a mark of its own there.
const cacheTest = `import os, unittest


class TestCache(unittest.TestCase):
    def test_cache(self):
        d = os.environ["GOCACHE"]
        marks = sorted(n for n in os.listdir(d) if n.startswith("mark-"))
        with open("seen.txt", "a") as f:
            f.write(d + " " + ",".join(marks) + "\n")
        with open("seen.txt") as f:
            runs = len(f.readlines())
        open(os.path.join(d, "mark-%d" % runs), "w").write("x")
`

// TestSandboxedValidatorsShareTheRunsBuildCache: with the sandbox on, the
// run's command validators get a build cache. The test baseline, taken
// before the model's first turn, writes it; the validation after the
// model's turn finds what the baseline left but writes only its own copy.
// The Bash tool's commands share another cache, which the validators do
// not see, nor Bash theirs. Both are gone when the run ends.
func TestSandboxedValidatorsShareTheRunsBuildCache(t *testing.T) {
	needSandbox(t)
	needSystemPython(t)
	dir := writeAgent(t, map[string]string{
		"agent.json": `{
  "version": "1.0.0", "name": "cache", "description": "validators that share a cache",
  "runner": {
    "model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "DONE", "validators": ["tests"]},
    "boundaries": {"allowedTools": ["Write", "Bash"], "permissionMode": "acceptEdits", "sandbox": {"enabled": true}},
    "budgets": {"maxIterations": 1}
  }
}`,
		"steps_registry.json": `{"agentId": "cache", "c1": "steps", "entryStep": "initial.work",
  "validators": {"tests": {"type": "command", "command": "python3 -m unittest -v", "failurePattern": "test-failed"}},
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work"}}}`,
		"prompts/steps/initial/work/f_default.md": "Work.",
		"script.yaml": `turns:
  - tool_calls:
      - name: Bash
        input: {command: 'echo x > "$GOCACHE/mark-bash" && echo "$GOCACHE" > bash1.txt'}
  - tool_calls:
      - name: Bash
        input: {command: 'echo "$GOCACHE" > bash2.txt && ls "$GOCACHE" >> bash2.txt'}
  - text: "Done. DONE"
`,
	})
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "test_cache.py"), []byte(cacheTest), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: work, Store: journal.Store{Dir: t.TempDir()}})
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	b, err := os.ReadFile(filepath.Join(work, "seen.txt"))
	if err != nil {
		t.Fatal(err)
	}
	runs := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(runs) != 3 {
		t.Fatalf("want the baseline, one validation and the clean run after it, got:\n%s", b)
	}
	baseDir, baseMarks, _ := strings.Cut(runs[0], " ")
	runDir, runMarks, _ := strings.Cut(runs[1], " ")
	cleanDir, cleanMarks, _ := strings.Cut(runs[2], " ")
	if baseMarks != "" || runMarks != "mark-1" || cleanMarks != "mark-1" || cleanDir == runDir {
		t.Errorf("the validation and the clean run must each find the baseline's mark and only it, each in a copy of its own:\n%s", b)
	}
	if runDir == baseDir || !strings.HasPrefix(runDir, filepath.Dir(filepath.Dir(baseDir))+string(filepath.Separator)) {
		t.Errorf("the validation after the model's turn must work on a copy of the cache beside it:\n%s", b)
	}
	// Bash has a cache of its own, kept from one command to the next.
	b1, err1 := os.ReadFile(filepath.Join(work, "bash1.txt"))
	b2, err2 := os.ReadFile(filepath.Join(work, "bash2.txt"))
	bashDir := strings.TrimSpace(string(b1))
	if err1 != nil || err2 != nil || !strings.HasPrefix(string(b2), bashDir+"\nmark-bash\n") || strings.Contains(string(b2), "mark-1") ||
		bashDir == baseDir || bashDir == runDir {
		t.Errorf("Bash's commands must share a cache apart from the validators' one: %q %q %v %v (validators: %s)", b1, b2, err1, err2, b)
	}
	for _, d := range []string{baseDir, runDir, bashDir} {
		if _, err := os.Stat(filepath.Dir(d)); !os.IsNotExist(err) {
			t.Errorf("%s outlived the run: %v", filepath.Dir(d), err)
		}
	}
}

// TestValidatorCacheOutOfTheModelsReach: a temporary directory inside the
// work dir (TMPDIR) would put the validators' build cache where the
// model's Bash writes; the run then gives its validators no shared cache,
// and what Bash plants there reaches no validation.
func TestValidatorCacheOutOfTheModelsReach(t *testing.T) {
	needSandbox(t)
	needSystemPython(t)
	dir := writeAgent(t, map[string]string{
		"agent.json": `{
  "version": "1.0.0", "name": "cache", "description": "validators that share a cache",
  "runner": {
    "model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "DONE", "validators": ["tests"]},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits", "sandbox": {"enabled": true}},
    "budgets": {"maxIterations": 1}
  }
}`,
		"steps_registry.json": `{"agentId": "cache", "c1": "steps", "entryStep": "initial.work",
  "validators": {"tests": {"type": "command", "command": "python3 -m unittest -v", "failurePattern": "test-failed"}},
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work"}}}`,
		"prompts/steps/initial/work/f_default.md": "Work.",
		"script.yaml": `turns:
  - tool_calls:
      - name: Bash
        input: {command: 'for d in tmp/capstan-cache-*/go-build; do echo x > "$d/mark-planted"; done; ls tmp > planted.txt'}
  - text: "Done. DONE"
`,
	})
	work, store := t.TempDir(), t.TempDir()
	seen := `import os, unittest


class TestCache(unittest.TestCase):
    def test_cache(self):
        d = os.environ.get("GOCACHE", "")
        marks = sorted(os.listdir(d)) if d and os.path.isdir(d) else []
        with open("seen.txt", "a") as f:
            f.write(d + " " + ",".join(marks) + "\n")
`
	if err := os.WriteFile(filepath.Join(work, "test_cache.py"), []byte(seen), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(work, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", filepath.Join(work, "tmp"))
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: work, Store: journal.Store{Dir: store}})
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	b, err := os.ReadFile(filepath.Join(work, "seen.txt"))
	if err != nil {
		t.Fatal(err)
	}
	planted, _ := os.ReadFile(filepath.Join(work, "planted.txt"))
	if strings.Contains(string(b), "mark-planted") {
		t.Errorf("a validation found what the model's Bash planted in the work dir's tmp (%q):\n%s", planted, b)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "the validators get no shared build cache") {
		t.Errorf("the run must say why its validators have no cache: %q", res.Warnings)
	}
}

// TestResumedRunValidatorsReadTheSeedAndNeverWriteIt: a resumed run's
// work dir holds the model's code, so its validators get a build cache
// that holds only Go's standard library seed, sealed before any of them
// runs (a validation without it compiled the standard library again, for
// tens of CPU seconds each). One validator finds the seed and plants a
// file in its cache; the next validator of the same verification does
// not see it.
func TestResumedRunValidatorsReadTheSeedAndNeverWriteIt(t *testing.T) {
	needSandbox(t)
	needTools(t, "git", "go")
	dir := writeAgent(t, map[string]string{
		"agent.json": `{
  "version": "1.0.0", "name": "resumecache", "description": "validators of a resumed run",
  "runner": {
    "model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "DONE", "validators": ["seeded", "unplanted"]},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"},
    "budgets": {"maxIterations": 2}
  }
}`,
		"steps_registry.json": `{"agentId": "resumecache", "c1": "steps", "entryStep": "initial.work",
  "validators": {
    "seeded": {"type": "command", "command": "test -f \"$GOCACHE/README\" && test \"$(find \"$GOCACHE\" -type f | wc -l)\" -gt 100 && echo planted > \"$GOCACHE/planted\"", "failurePattern": "format-error"},
    "unplanted": {"type": "command", "command": "test -d \"$GOCACHE\" && test ! -e \"$GOCACHE/planted\"", "failurePattern": "lint-error"}},
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work"}}}`,
		"prompts/steps/initial/work/f_default.md": "Work.",
		"script.yaml": `turns:
  - text: "Working on it."
  - text: "Done. DONE"
`,
	})
	def, wd := load(t, dir), gitFixture(t, goFixture)
	first := runToEnd(t, def, BuildOptions{WorkDir: wd, MaxIterations: 1})
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil || first.CompletionReason != "max_iterations" {
		t.Fatalf("%+v %v", first, err)
	}
	res := runToEnd(t, def, BuildOptions{WorkDir: wd, Resume: rec})
	if !res.Success {
		patterns, _ := retryPatterns(t, res)
		t.Fatalf("the resumed run's validators (want the seed, and no file a validator planted): %+v %+v, retry patterns %v", res, res.Error, patterns)
	}
}
