//go:build linux

package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/sandbox"
)

var (
	sandboxOnce sync.Once
	sandboxRun  *sandbox.CommandRunner
	sandboxErr  error
)

// validatorSandbox is the sandbox an agent with runner.boundaries.sandbox
// enabled gives its validators; the test skips, with the reason, on a
// machine that cannot sandbox (as the sandbox package's tests do).
func validatorSandbox(t testing.TB) *sandbox.CommandRunner {
	t.Helper()
	sandboxOnce.Do(func() {
		sandboxRun, sandboxErr = sandbox.NewCommandRunner(context.Background(), &agentdir.Sandbox{})
	})
	if sandboxErr != nil {
		t.Skipf("sandbox unavailable here: %v", sandboxErr)
	}
	return sandboxRun.WithLimits(sandbox.ValidatorLimits())
}

// attack is a work dir whose test suite a hostile model wrote, and the
// things outside it that the suite goes after.
type attack struct {
	work, hosts, journal, forged, late string
	journalBytes                       []byte
}

const (
	hostsMarker   = "gho_HOSTS-MARKER-0123456789"
	journalMarker = "JOURNAL-MARKER-0123456789"
)

// newAttack lays out a credential file (a gh hosts.yml) and a run
// journal in a state directory, both outside the work dir, and a work dir
// with leak_test.sh: a "test" that passes while it prints the credentials
// and the journal, appends a forged line to the journal, writes outside
// the work dir and leaves a process behind that appends a line to
// late.txt five times a second for three seconds. It knows every path
// (the worst case).
func newAttack(t *testing.T) attack {
	t.Helper()
	base := t.TempDir()
	a := attack{work: filepath.Join(base, "work"), hosts: filepath.Join(base, "home", ".config", "gh", "hosts.yml"),
		forged: filepath.Join(base, "outside", "forged.txt")}
	a.late = filepath.Join(a.work, "late.txt")
	for _, d := range []string{a.work, filepath.Dir(a.hosts), filepath.Dir(a.forged)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(a.hosts, []byte("github.com:\n    oauth_token: "+hostsMarker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := journal.Store{Dir: filepath.Join(base, "state")}.Create(a.work, "r1")
	if err != nil {
		t.Fatal(err)
	}
	w.Append(journal.RunStart, map[string]any{"agent": "a"})
	w.Append("tests.baseline", map[string]any{"validator": "tests", "marker": journalMarker})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a.journal = w.Path()
	if a.journalBytes, err = os.ReadFile(a.journal); err != nil {
		t.Fatal(err)
	}
	script := "cat " + a.hosts + "\n" +
		"cat " + a.journal + "\n" +
		`echo '{"seq":3,"type":"tests.baseline","data":{"validator":"tests"}}' >> ` + a.journal + "\n" +
		"echo forged > " + a.forged + "\n" +
		"setsid sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo late >> " + a.late + "; sleep 0.2; done' </dev/null >/dev/null 2>&1 &\n" +
		"echo tests passed\n"
	if err := os.WriteFile(filepath.Join(a.work, "leak_test.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return a
}

// run runs the suite as a command validator, confined by sb (nil: not).
func (a attack) run(t *testing.T, sb CommandSandbox) event.ValidatorRun {
	t.Helper()
	v := newValidator(t, ValidatorConfig{
		Validators: map[string]agentdir.Validator{"tests": {Type: "command", Command: "sh leak_test.sh", FailurePattern: "failed"}},
		Patterns:   map[string]agentdir.CompletionPattern{"failed": {Edition: "failed"}},
		WorkDir:    a.work,
		Sandbox:    sb,
	})
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "tests"}})
	if err != nil || !r.Valid || len(r.Runs) != 1 {
		t.Fatalf("the suite passes either way: %+v %v", r, err)
	}
	return r.Runs[0]
}

// TestSandboxedValidatorConfinesTheModelsTests: with the sandbox on, a
// test suite the model wrote, run by a command validator, cannot read a
// credential file or the run journal outside the work dir, cannot forge
// the journal or write elsewhere, and leaves no process behind — and its
// passing run still counts. The control, unsandboxed, does all of it.
func TestSandboxedValidatorConfinesTheModelsTests(t *testing.T) {
	sb := validatorSandbox(t)
	a := newAttack(t)
	run := a.run(t, sb)
	out := run.Output.Stdout + run.Output.Stderr
	if !strings.Contains(out, "tests passed") {
		t.Fatalf("the suite did not run in the sandbox:\n%s", out)
	}
	if strings.Contains(out, hostsMarker) || strings.Contains(out, journalMarker) {
		t.Errorf("the sandboxed suite read what is outside the work dir:\n%s", out)
	}
	if got, err := os.ReadFile(a.journal); err != nil || !bytes.Equal(got, a.journalBytes) {
		t.Errorf("the journal changed: %q %v", got, err)
	}
	if _, in, err := journal.ReadChecked(a.journal); err != nil || in.Err() != nil {
		t.Errorf("journal: %v %v", err, in.Err())
	}
	if _, err := os.Stat(a.forged); err == nil {
		t.Error("the sandboxed suite wrote outside the work dir")
	}
	// The background writer may have written while the validator ran (how
	// long that took is up to the machine); once it has returned,
	// late.txt must not grow.
	before := lateLines(a.late)
	time.Sleep(time.Second)
	if after := lateLines(a.late); after != before {
		t.Errorf("a process the sandboxed suite left behind outlived the validator: late.txt grew from %d to %d lines", before, after)
	}

	// The control: the same suite unsandboxed.
	c := newAttack(t)
	run = c.run(t, nil)
	out = run.Output.Stdout + run.Output.Stderr
	if !strings.Contains(out, hostsMarker) || !strings.Contains(out, journalMarker) {
		t.Errorf("control: the unsandboxed suite did not read the credentials and the journal, so the test proves nothing:\n%s", out)
	}
	if got, _ := os.ReadFile(c.journal); bytes.Equal(got, c.journalBytes) {
		t.Error("control: the unsandboxed suite did not append to the journal")
	}
	if _, err := os.Stat(c.forged); err != nil {
		t.Errorf("control: the unsandboxed suite did not write outside the work dir: %v", err)
	}
	// Unsandboxed too, the supervisor the command runs under kills what
	// it left behind when it returns: late.txt does not grow.
	before = lateLines(c.late)
	time.Sleep(time.Second)
	if after := lateLines(c.late); after != before {
		t.Errorf("control: a process the unsandboxed suite left behind outlived the validator: late.txt grew from %d to %d lines", before, after)
	}
}

// lateLines counts the lines in path (0 when it does not exist).
func lateLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// TestSandboxedValidatorKeepsItsTimeoutAndOutputCap: in the sandbox a
// validator keeps its own output cap (a suite that prints more than the
// cap is cut, not killed, and still passes) and its own timeout, as it
// does unsandboxed.
func TestSandboxedValidatorKeepsItsTimeoutAndOutputCap(t *testing.T) {
	sb := validatorSandbox(t)
	for _, c := range []struct {
		name string
		sb   CommandSandbox
	}{{"sandboxed", sb}, {"unsandboxed", nil}} {
		t.Run(c.name, func(t *testing.T) {
			v := newValidator(t, ValidatorConfig{
				Validators: map[string]agentdir.Validator{
					"loud": {Type: "command", Command: "yes | head -c 3000000; yes e | head -c 5000 >&2", FailurePattern: "failed"},
					"slow": {Type: "command", Command: "sleep 30", TimeoutSeconds: 1, FailurePattern: "failed"},
				},
				Patterns:  map[string]agentdir.CompletionPattern{"failed": {Edition: "failed"}},
				WorkDir:   t.TempDir(),
				OutputCap: 1000,
				Sandbox:   c.sb,
			})
			r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "loud"}})
			if err != nil || !r.Valid || len(r.Runs) != 1 {
				t.Fatalf("loud: %+v %v", r, err)
			}
			o := r.Runs[0].Output
			// The first and the last 500 bytes of each stream, whole lines.
			if !o.Truncated || o.ExitCode != 0 ||
				o.Stdout != strings.Repeat("y\n", 250)+"[capstan: output truncated, 2999000 bytes omitted here]\n"+strings.Repeat("y\n", 250) ||
				o.Stderr != strings.Repeat("e\n", 250)+"[capstan: output truncated, 4000 bytes omitted here]\n"+strings.Repeat("e\n", 250) {
				t.Errorf("loud output: %+v", o)
			}
			r, err = v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "slow"}})
			if err != nil || r.Valid || r.Output == nil || !r.Output.TimedOut || r.Output.ExitCode != -1 ||
				!strings.Contains(r.Output.Stderr, "[capstan: command killed after timeout of 1s]") {
				t.Errorf("slow: %+v %v", r.Output, err)
			}
		})
	}
}

// TestSandboxedValidatorRunsGoTestAndGitChecks: the commands validators
// are made of work in the sandbox — go test of a module in the work dir
// (with a fresh build cache: the user's is out of reach) and git status
// of the work dir's repository.
func TestSandboxedValidatorRunsGoTestAndGitChecks(t *testing.T) {
	sb := validatorSandbox(t)
	needCommands(t, "git", "go")
	needReadableInSandbox(t, "go")
	if testing.Short() {
		t.Skip("compiles the standard library in a fresh build cache (about 20 s); not with -short")
	}
	work := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.21\n",
		"calc.go":      "// Package calc adds.\npackage calc\n\n// Add returns a+b.\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n",
	} {
		write(t, work, name, body)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "fixture"}} {
		if out, err := exec.Command("git", append([]string{"-C", work}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	v := newValidator(t, ValidatorConfig{
		Validators: map[string]agentdir.Validator{
			"tests": {Type: "command", Command: "go test -v ./...", SuccessWhen: "contains:--- PASS: TestAdd", FailurePattern: "failed"},
			"clean": {Type: "command", Command: "git status --porcelain", SuccessWhen: "empty", FailurePattern: "failed"},
		},
		Patterns: map[string]agentdir.CompletionPattern{"failed": {Edition: "failed"}},
		WorkDir:  work,
		Sandbox:  sb,
	})
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "tests"}, {Validator: "clean"}})
	if err != nil || !r.Valid || len(r.Runs) != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	// git really looked: an untracked file makes the tree unclean.
	write(t, work, "stray.txt", "x")
	r, err = v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "clean"}})
	if err != nil || r.Valid || r.Output == nil || !strings.Contains(r.Output.Stdout, "?? stray.txt") {
		t.Fatalf("unclean tree: %+v %v", r.Output, err)
	}
}

// TestValidatorNeverRunsUnconfinedWhenTheSandboxFails: a sandbox that
// cannot be set up makes the validator an error (SANDBOX_UNAVAILABLE in
// the chain), and the command does not run; with allowUnsandboxed it runs
// confined by Landlock and rlimits only, as the Bash tool does.
func TestValidatorNeverRunsUnconfinedWhenTheSandboxFails(t *testing.T) {
	real := validatorSandbox(t).Runner.Capabilities()
	noNamespaces := sandbox.Capabilities{LandlockABI: real.LandlockABI, Reason: "test: no namespaces", Hint: "none"}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	write(t, filepath.Dir(secret), "secret.txt", "SECRET-MARKER")
	validate := func(allow bool) (string, event.ValidationResult, error) {
		work := t.TempDir()
		r := sandbox.New(context.Background(), sandbox.Config{Capabilities: &noNamespaces, AllowUnsandboxed: allow})
		v := newValidator(t, ValidatorConfig{
			Validators: map[string]agentdir.Validator{"tests": {Type: "command", Command: "touch ran; cat " + secret, FailurePattern: "failed"}},
			Patterns:   map[string]agentdir.CompletionPattern{"failed": {Edition: "failed"}},
			WorkDir:    work,
			Sandbox:    (&sandbox.CommandRunner{Runner: r}).WithLimits(sandbox.ValidatorLimits()),
		})
		res, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "tests"}})
		return work, res, err
	}
	work, res, err := validate(false)
	if !errors.Is(err, agenterr.ErrSandboxUnavailable) || agenterr.CodeOf(err) != agenterr.CodeValidator {
		t.Fatalf("want VALIDATOR_ERROR caused by SANDBOX_UNAVAILABLE, got %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(work, "ran")); err == nil {
		t.Fatal("the command ran although the sandbox could not be set up")
	}
	if real.LandlockABI == 0 {
		return
	}
	work, res, err = validate(true)
	if err != nil || res.Valid || res.Output == nil || strings.Contains(res.Output.Stdout, "SECRET-MARKER") {
		t.Fatalf("allowUnsandboxed: the command must run under Landlock and fail to read the secret: %+v %v", res.Output, err)
	}
	if _, err := os.Stat(filepath.Join(work, "ran")); err != nil {
		t.Fatalf("allowUnsandboxed: the command did not run: %v", err)
	}
}

// needCommands skips (fails under CI) when a command is not on PATH.
func needCommands(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not on PATH (CI installs it)", n)
			}
			t.Skipf("%s not on PATH", n)
		}
	}
}

// needReadableInSandbox skips (fails under CI) when the program name
// resolves to a file outside the system directories the sandbox can read
// (a Go toolchain under /opt, say), where no sandboxed command finds it.
func needReadableInSandbox(t *testing.T, name string) {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err == nil {
		for _, dir := range sandbox.DefaultSystemPaths() {
			if strings.HasPrefix(p, dir+"/") {
				return
			}
		}
	}
	msg := fmt.Sprintf("%s (%s %v) is not in a directory the sandbox can read (%s)", name, p, err, strings.Join(sandbox.DefaultSystemPaths()[:6], " "))
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestSandboxedValidatorsShareASealedBuildCache: the validators of a run
// share a build cache. The run before the model's first turn (the test
// baseline) fills it, so a later go test compiles none of the standard
// library; once sealed, every run works on its own copy, so a test the
// model wrote plants nothing for a later validation to trust.
func TestSandboxedValidatorsShareASealedBuildCache(t *testing.T) {
	sb := validatorSandbox(t)
	needCommands(t, "go")
	needReadableInSandbox(t, "go")
	if testing.Short() {
		t.Skip("compiles the standard library once (about 20 s); not with -short")
	}
	cache, err := sandbox.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Remove()
	work := t.TempDir()
	write(t, work, "go.mod", "module example.com/calc\n\ngo 1.21\n")
	write(t, work, "calc_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {}\n")
	v := newValidator(t, ValidatorConfig{
		Validators: map[string]agentdir.Validator{"tests": {Type: "command", Command: "go test -x -v ./...", SuccessWhen: "contains:--- PASS", FailurePattern: "failed"}},
		Patterns:   map[string]agentdir.CompletionPattern{"failed": {Edition: "failed"}},
		WorkDir:    work,
		Sandbox:    sb.WithCache(cache),
	})
	validate := func() event.ValidatorOutput {
		t.Helper()
		r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "tests"}})
		if err != nil || !r.Valid || len(r.Runs) != 1 {
			t.Fatalf("%+v %v", r, err)
		}
		return r.Runs[0].Output
	}
	const compilesRuntime = " -p runtime "
	if o := validate(); !strings.Contains(o.Stderr, compilesRuntime) {
		t.Fatalf("the first run did not compile the standard library, so the test proves nothing:\n%s", o.Stderr)
	}
	cache.Seal()
	// The model's test plants an entry in the cache and looks for the
	// one an earlier run planted.
	write(t, work, "calc_test.go", "package calc\n\nimport (\n\t\"os\"\n\t\"path/filepath\"\n\t\"testing\"\n)\n\n"+
		"func TestAdd(t *testing.T) {\n\tp := filepath.Join(os.Getenv(\"GOCACHE\"), \"ff\", \"planted-a\")\n"+
		"\t_, err := os.Stat(p)\n\tt.Logf(\"earlier plant found: %v\", err == nil)\n"+
		"\tt.Logf(\"plant: %v\", os.WriteFile(p, []byte(\"x\"), 0o644))\n}\n")
	var o event.ValidatorOutput
	for range 2 {
		o = validate()
		if strings.Contains(o.Stderr, compilesRuntime) {
			t.Errorf("the sealed cache was not used: runtime compiled again")
		}
		if !strings.Contains(o.Stdout, "plant: <nil>") || !strings.Contains(o.Stdout, "earlier plant found: false") {
			t.Errorf("a run must write its own copy of the sealed cache, and see nothing an earlier run planted:\n%s", o.Stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(cache.Dir(), "go-build", "ff", "planted-a")); err == nil {
		t.Error("an entry was planted in the sealed cache")
	}
	t.Logf("go test with the sealed cache: %d ms", o.DurationMs)
}

// TestSandboxedValidatorReport: in the sandbox the whole standard output
// reaches the report (beyond the output cap), a write to /dev/stdout (how
// pytest is asked for its JUnit XML) included, and PYTEST_ADDOPTS asks
// for it.
func TestSandboxedValidatorReport(t *testing.T) {
	sb := validatorSandbox(t)
	dir := t.TempDir()
	v, err := NewCompletionValidator(ValidatorConfig{WorkDir: dir, Sandbox: sb, OutputCap: 64,
		Validators: map[string]agentdir.Validator{"t": {Type: "command", FailurePattern: "test-failed",
			Command: `: pytest; i=0; while [ $i -lt 50 ]; do echo "line $i"; i=$((i+1)); done; echo "$PYTEST_ADDOPTS" > /dev/stdout`}}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	run, err := v.RunCommandValidator(context.Background(), agentdir.CompletionCondition{Validator: "t"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(run.Output.Report)
	if err != nil || !run.Output.Truncated || run.Output.ReportTruncated {
		t.Fatalf("report %v, output truncated %v, report truncated %v", err, run.Output.Truncated, run.Output.ReportTruncated)
	}
	if !strings.Contains(string(data), "line 25\n") || !strings.Contains(string(data), "--junitxml=/dev/stdout") {
		t.Fatalf("report:\n%s", data)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(run.Output.Report); !os.IsNotExist(err) {
		t.Fatalf("report left after Close: %v", err)
	}
}
