package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/verify"
)

// needTool fails the test in CI (CI installs every tool the tests use)
// and skips it elsewhere, with the reason, when err says a tool is
// missing.
func needTool(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: %v (CI must install it, see .ci/run)", what, err)
	}
	t.Skipf("%s: %v", what, err)
}

// fixRepo copies testdata/fix/<name> (without its script.yaml; a file
// named gitignore becomes .gitignore; for "go", the fix-failing-test
// example's module) into a new git repository with an identity of its
// own and returns its path and the script's.
func fixRepo(t *testing.T, name string) (repo, script string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "fix", name))
	if err != nil {
		t.Fatal(err)
	}
	src := dir
	if name == "go" {
		src = filepath.Join("..", "..", "examples", "fix-failing-test", "fixture")
	}
	repo = t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "script.yaml" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		to := e.Name()
		if to == "gitignore" {
			to = ".gitignore"
		}
		if err := os.WriteFile(filepath.Join(repo, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, repo, "init", "-q")
	git(t, repo, "config", "user.name", "capstan test")
	git(t, repo, "config", "user.email", "test@capstan.invalid")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "start: add is broken")
	return repo, filepath.Join(dir, "script.yaml")
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// onTerminal runs line with sh under a pseudo-terminal (script(1)) in
// dir, with capstan on PATH, and returns its exit code and everything the
// terminal showed.
func onTerminal(t *testing.T, dir, line string) (int, string) {
	t.Helper()
	_, err := exec.LookPath("script")
	needTool(t, "script(1) from util-linux runs capstan under a pseudo-terminal", err)
	cmd := exec.Command("script", "-qec", line, "/dev/null")
	cmd.Dir, cmd.Env = dir, append(capstanOnPath(t), "TERM=xterm", "NO_COLOR=")
	return exitAndOutput(t, cmd)
}

// The status line as a terminal shows it: a carriage return, erase to the
// end of the line, then the text.
var statusFrame = regexp.MustCompile("\r\x1b\\[K([^\r\n]*)")

// checkFixRun checks the account of a capstan fix run on a terminal:
// the status line showed the baseline's and each validator's command with
// its elapsed time, a wrong fix got the targeted retry, and the right one
// completed, in color.
func checkFixRun(t *testing.T, code int, out, testCommand string) {
	t.Helper()
	if code != 0 {
		t.Fatalf("capstan fix: exit %d\n%s", code, out)
	}
	var frames []string
	for _, m := range statusFrame.FindAllStringSubmatch(out, -1) {
		frames = append(frames, m[1])
	}
	shown := strings.Join(frames, "\n")
	// The status line cuts a long command to fit a terminal.
	command := testCommand[:min(len(testCommand), 30)]
	for _, want := range []string{
		"test baseline: tests-pass: " + command,
		"[iteration 1] step complete.fix: waiting for the model",
		"[iteration 1] step complete.fix: tests-pass: " + command,
		"[iteration 2] step complete.fix: git-clean: git status --porcelain ",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the status line never showed %q; it showed:\n%s", want, shown)
		}
	}
	if !regexp.MustCompile(`tests-pass: .* \d+(\.\d)?s`).MatchString(shown) {
		t.Errorf("the status line shows no elapsed time:\n%s", shown)
	}
	for _, want := range []string{
		"but tests-pass failed (pattern test-failed); attempt 1 of 6 failed, retry prompt sent",
		"verified by protected-files, tests-pass, git-clean, no-lost-tests",
		"\x1b[1;32mCOMPLETED\x1b[0m",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// needSystemPytest needs pytest for /usr/bin/python3, the python3 the
// sandbox's PATH finds.
func needSystemPytest(t *testing.T) {
	t.Helper()
	_, err := exec.Command("/usr/bin/python3", "-m", "pytest", "--version").CombinedOutput()
	needTool(t, "pytest for the system python3 (the sandbox's PATH)", err)
}

func needSandbox(t *testing.T) {
	t.Helper()
	needTool(t, "capstan fix runs the model's commands and the checks in the sandbox", sandbox.Probe(t.Context()).Unavailable())
}

// capstan fix in a Go module with a failing test, driven by a scripted
// model through a wrong fix, the retry prompt naming the failing test and
// the right fix: COMPLETED, with the status line visible on a terminal.
func TestFixGoModuleOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs go test in the sandbox three times")
	}
	needSandbox(t)
	repo, script := fixRepo(t, "go")
	code, out := onTerminal(t, repo, "capstan fix 'make the failing tests pass' --model script:"+verify.ShellQuote(script))
	checkFixRun(t, code, out, "go test -count=1 -v ./...")
}

// The same in a Python project tested with pytest and without a
// .gitignore: the checks leave no __pycache__ or .pytest_cache, so
// git-clean judges the model's work only.
func TestFixPytestProjectOnATerminal(t *testing.T) {
	needSandbox(t)
	needSystemPytest(t)
	repo, script := fixRepo(t, "pytest")
	code, out := onTerminal(t, repo, "capstan fix 'make the failing tests pass' --model script:"+verify.ShellQuote(script))
	checkFixRun(t, code, out, "python3 -m pytest -v -p no:cacheprovider")
}

// jsTestRunners are the JavaScript test runners capstan fix is tested
// with, at the versions .ci/run installs.
var jsTestRunners = map[string]string{"jest": "29.7.0", "vitest": "2.1.9"}

// nodeModules returns a node_modules directory with the test runner
// named: the one .ci/run installs (CAPSTAN_TEST_NODE_MODULES), else one
// installed once per machine from the npm cache only, never the network.
func nodeModules(runner string) (string, error) {
	if root := os.Getenv("CAPSTAN_TEST_NODE_MODULES"); root != "" {
		modules := filepath.Join(root, "node_modules")
		if _, err := os.Stat(filepath.Join(modules, ".bin", runner)); err != nil {
			return "", err
		}
		return modules, nil
	}
	return nodeModulesFromCache[runner]()
}

// nodeModulesFromCache installs each runner at most once per test binary.
var nodeModulesFromCache = func() map[string]func() (string, error) {
	m := map[string]func() (string, error){}
	for runner, version := range jsTestRunners {
		m[runner] = sync.OnceValues(func() (string, error) {
			dir := filepath.Join(os.TempDir(), "capstan-test-"+runner+"-"+version)
			modules := filepath.Join(dir, "node_modules")
			if _, err := os.Stat(filepath.Join(modules, ".bin", runner)); err == nil {
				return modules, nil
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", err
			}
			pkg := `{"name": "` + runner + `-modules", "private": true, "devDependencies": {"` + runner + `": "` + version + `"}}`
			if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
				return "", err
			}
			cmd := exec.Command("npm", "install", "--offline", "--no-audit", "--no-fund", "--silent")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", errors.New("npm install --offline " + runner + "@" + version + ": " + err.Error() + "\n" + string(out))
			}
			return modules, nil
		})
	}
	return m
}()

// The same in a JavaScript package tested with jest, and in one tested
// with vitest (whose workers hung in a sandbox without a readable
// /proc/self/stat: the results printed, the command never ended).
func TestFixJavaScriptPackageOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jest and vitest in the sandbox three times each")
	}
	needSandbox(t)
	for runner, testCommand := range map[string]string{
		"jest":   "npx --no-install jest --ci --verbose",
		"vitest": "npx --no-install vitest run --reporter=verbose",
	} {
		t.Run(runner, func(t *testing.T) {
			repo, script := jsFixRepo(t, runner)
			code, out := onTerminal(t, repo, "capstan fix 'make the failing tests pass' --model script:"+verify.ShellQuote(script))
			checkFixRun(t, code, out, testCommand)
		})
	}
}

// --print-agent writes the agent as a folder that capstan validate
// accepts and capstan run runs the same way, to completion.
func TestFixPrintAgentRunsTheSame(t *testing.T) {
	needSandbox(t)
	needSystemPytest(t)
	repo, script := fixRepo(t, "pytest")
	folder := filepath.Join(t.TempDir(), "fixer")
	sh := pasteShell(t, repo)
	code, out := sh("capstan fix 'make the failing tests pass' --check 'lint=python3 -c \"import calc\"' --model script:" + verify.ShellQuote(script) + " --print-agent " + verify.ShellQuote(folder))
	if code != 0 {
		t.Fatalf("--print-agent: exit %d\n%s", code, out)
	}
	for _, f := range []string{"agent.json", "steps_registry.json", "prompts/system.md", "prompts/steps/retry/fix/f_default.md",
		"prompts/steps/retry/fix/f_failed_test-failed.md", "prompts/steps/retry/fix/f_failed_check-failed.md", "schemas/fix.schema.json", "script.yaml"} {
		if _, err := os.Stat(filepath.Join(folder, f)); err != nil {
			t.Errorf("the folder has no %s: %v", f, err)
		}
	}
	// The printed next: commands, pasted.
	validate := "capstan validate " + pastedCommand(t, out, "  capstan validate ")
	if code, vout := sh(validate); code != 0 || !strings.Contains(vout, "valid (0 warnings)") {
		t.Fatalf("%s: exit %d\n%s", validate, code, vout)
	}
	run := "capstan run " + pastedCommand(t, out, "  capstan run ")
	code, out = sh(run)
	if code != 0 || !strings.Contains(out, "verified by protected-files, tests-pass, lint, git-clean, no-lost-tests") ||
		!strings.Contains(out, "attempt 1 of 6 failed") {
		t.Fatalf("%s: exit %d\n%s", run, code, out)
	}
	// The folder is not written over.
	if code, out := sh("capstan fix 'x' --print-agent " + verify.ShellQuote(folder)); code != exitUsage || !strings.Contains(out, "is not empty") {
		t.Fatalf("--print-agent into a full folder: exit %d\n%s", code, out)
	}
}

// capstan fix for a user whose git identity is in ~/.gitconfig only (the
// repository sets none): the model's git commit runs in the sandbox,
// whose HOME is private, and is made as that user. A user with no
// identity at all is refused before anything runs, and the printed hint,
// pasted, sets one: the same command then completes.
func TestFixCommitsAsTheUsersGlobalIdentity(t *testing.T) {
	needSandbox(t)
	repo, script := fixRepo(t, "go")
	git(t, repo, "config", "--unset", "user.name")
	git(t, repo, "config", "--unset", "user.email")
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(name, strings.TrimSpace(string(out))) // not under the new HOME
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	os.Unsetenv("GIT_CONFIG_GLOBAL") // the test identity (testenv.IsolateGitConfig): git reads HOME/.gitconfig
	t.Setenv("XDG_CONFIG_HOME", "")
	sh := pasteShell(t, repo)
	fix := "capstan fix 'make the failing tests pass' --model script:" + verify.ShellQuote(script)
	code, out := sh(fix)
	if code != exitUsage || !strings.Contains(out, "capstan: CONFIG_INVALID: fix: git does not know who you are") ||
		!strings.Contains(out, "; hint: set them") || strings.Contains(out, "test baseline") {
		t.Fatalf("no identity: exit %d, want %d before anything runs\n%s", code, exitUsage, out)
	}
	if code, out := sh(pastedCommand(t, out, "with: ")); code != 0 {
		t.Fatalf("the pasted hint: exit %d\n%s", code, out)
	}
	if testing.Short() {
		return // the run compiles and runs go test in the sandbox three times
	}
	code, out = sh(fix)
	if code != exitOK || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	author, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%an <%ae> / %cn <%ce>").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(author)); got != "Your Name <you@example.com> / Your Name <you@example.com>" {
		t.Errorf("the fix was committed as %q", got)
	}
}

// capstan fix without an API key says so before anything slow: the Go
// build cache (which compiles Go's standard library on a new machine, a
// minute) is seeded only once the run can start.
func TestFixWithoutAKeyFailsBeforeTheBuildCache(t *testing.T) {
	needSandbox(t)
	repo, _ := fixRepo(t, "go")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "")
	code, out := pasteShell(t, repo)("capstan fix 'make the failing tests pass' --model anthropic:claude-sonnet-4-5")
	if code != exitInternal && code != exitUsage || !strings.Contains(out, "SDK_AUTH") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if strings.Contains(out, "Go standard library") || strings.Contains(out, "build cache") {
		t.Errorf("the build cache was prepared before the missing key was told:\n%s", out)
	}
}

// capstan fix with a script model whose file does not exist is refused
// before anything runs, with the code, the file and what to do, in text
// and as the --json error object.
func TestFixWithAMissingScriptNamesTheFile(t *testing.T) {
	repo, _ := fixRepo(t, "go")
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	code, out, errOut := captureConfigCLI(t, "fix", "make the failing tests pass", "--workdir", repo, "--model", "script:"+missing, "--json")
	if code != exitUsage || !strings.Contains(errOut, "capstan: CONFIG_NOT_FOUND: fix: --model script:"+missing+": cannot read the script file") ||
		!strings.Contains(errOut, "hint: name an existing script file") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var got struct {
		Error struct{ Code, File, Hint string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Error.Code != agenterr.CodeConfigurationNotFound || got.Error.File == "" || got.Error.Hint == "" {
		t.Fatalf("--json error %v:\n%s", err, out)
	}
}

// What capstan fix refuses before anything runs is a coded usage error:
// a repository with no project file and no --check tests=…, a --check
// without a command and one that passes whatever the work dir holds; the
// message says what to pass.
func TestFixRefusalsAreCoded(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	script := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(script, []byte("turns:\n  - text: done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "capstan: CONFIG_INVALID: fix: no test command: "},
		{[]string{"--check", "tests="}, `capstan: CONFIG_INVALID: fix: --check "tests=" names check tests without a command`},
		{[]string{"--check", "X=1"}, `capstan: CONFIG_INVALID: fix: --check "X=1" always passes, so any fix would count: it only sets the shell variable X`},
		{[]string{"--check", "tests=go test ./... || true"}, `capstan: CONFIG_INVALID: fix: --check "tests=go test ./... || true" always passes`},
	} {
		args := append([]string{"fix", "make the failing tests pass", "--workdir", repo, "--model", "script:" + script}, c.args...)
		code, out, errOut := captureConfigCLI(t, append(args, "--json")...)
		var got struct{ Error struct{ Code string } }
		if code != exitUsage || !strings.Contains(errOut, c.want) || json.Unmarshal([]byte(out), &got) != nil || got.Error.Code != agenterr.CodeConfigurationValidation {
			t.Errorf("%v: exit %d, want %q and code CONFIG_INVALID:\n%s\n%s", c.args, code, c.want, errOut, out)
		}
	}
}
