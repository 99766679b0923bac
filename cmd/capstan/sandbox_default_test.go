package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// initAgent scaffolds an agent with capstan init and returns its folder.
func initAgent(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	if code, _, errOut := captureConfigCLI(t, "init", "boxed", "--dir", parent); code != 0 {
		t.Fatalf("init exit %d: %s", code, errOut)
	}
	return filepath.Join(parent, "boxed")
}

// TestRunsAreSandboxedByDefault: an agent that says nothing about the
// sandbox (capstan init's) runs sandboxed, and says so in its Result,
// its journal and capstan show; --no-sandbox opts out and every place a
// user looks says it: the first progress line, the summary, the Result
// ("sandboxed": false), run.start, show and the HTML report.
func TestRunsAreSandboxedByDefault(t *testing.T) {
	needSandbox(t)
	dir := initAgent(t)
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct {
		Sandboxed *bool  `json:"sandboxed"`
		RunID     string `json:"runId"`
		Warnings  []string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sandboxed == nil || !*res.Sandboxed {
		t.Fatalf("a default run is not sandboxed: %v\n%s", err, out)
	}
	if strings.Contains(errOut, "unsandboxed") {
		t.Fatalf("a sandboxed run says unsandboxed:\n%s", errOut)
	}
	if code, show, _ := captureConfigCLI(t, "show", res.RunID); code != 0 || !strings.Contains(show, "\nsandbox sandboxed\n") {
		t.Fatalf("show of a sandboxed run (exit %d):\n%s", code, show)
	}

	code, out, errOut = captureConfigCLI(t, "run", dir, "--workdir", wd, "--json", "--no-sandbox")
	if code != 0 {
		t.Fatalf("--no-sandbox: exit %d\n%s\n%s", code, out, errOut)
	}
	res.Sandboxed = nil
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sandboxed == nil || *res.Sandboxed {
		t.Fatalf("--no-sandbox: the Result does not say sandboxed: false: %v\n%s", err, out)
	}
	const why = "unsandboxed (--no-sandbox): Bash, validators, subprocess steps, MCP servers and the claude CLI's tools run with your rights"
	first := regexp.MustCompile(`(?m)^capstan: running boxed \(run [^)]*\) — (.*)$`).FindStringSubmatch(errOut)
	if first == nil || first[1] != why {
		t.Fatalf("the first progress line does not say the run is unsandboxed:\n%s", errOut)
	}
	if !strings.Contains(errOut, "warning: "+why) || len(res.Warnings) == 0 || res.Warnings[0] != why {
		t.Fatalf("summary or Result warnings: %v\n%s", res.Warnings, errOut)
	}
	journalText, err := os.ReadFile(runJournals(t, wd)[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(journalText), "\n") {
		if strings.Contains(line, `"type":"run.start"`) {
			if strings.Contains(line, `"runId":"`+res.RunID+`"`) && (!strings.Contains(line, `"sandboxed":false`) || !strings.Contains(line, `"unsandboxed":"`+why+`"`)) {
				t.Fatalf("run.start does not record the opt-out: %s", line)
			}
		}
	}
	if code, show, _ := captureConfigCLI(t, "show", res.RunID); code != 0 || !strings.Contains(show, "\nsandbox "+why+"\n") {
		t.Fatalf("show of an unsandboxed run (exit %d):\n%s", code, show)
	}
	page := filepath.Join(t.TempDir(), "r.html")
	if code, _, errOut := captureConfigCLI(t, "report", res.RunID, "-o", page); code != 0 {
		t.Fatalf("report exit %d: %s", code, errOut)
	}
	if html, _ := os.ReadFile(page); !strings.Contains(string(html), "unsandboxed (--no-sandbox)") {
		t.Fatalf("the HTML report does not say the run is unsandboxed")
	}
}

// TestAgentJSONOptsOut: "enabled": false under runner.boundaries.sandbox
// (climpt's spelling) opts the agent out, and the run says so.
func TestAgentJSONOptsOut(t *testing.T) {
	dir := initAgent(t)
	path := filepath.Join(dir, "agent.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"permissionMode": "acceptEdits"`, `"permissionMode": "acceptEdits", "sandbox": {"enabled": false}`, 1))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "--json")
	if code != 0 || !strings.Contains(out, `"sandboxed": false`) ||
		!strings.Contains(errOut, `— unsandboxed (agent.json runner.boundaries.sandbox "enabled": false)`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestSandboxUnavailableStopsTheRun makes this machine unable to sandbox
// for real — a user namespace whose user.max_user_namespaces is 0 (clone
// answers ENOSPC), and a seccomp filter under which the kernel answers
// landlock_create_ruleset with ENOSYS — and runs capstan there: the run
// stops before it starts with SANDBOX_UNAVAILABLE, exit 2, naming what is
// missing; doctor lists it first; and the opt-out the error prints, pasted
// as it is, runs the agent unsandboxed.
func TestSandboxUnavailableStopsTheRun(t *testing.T) {
	needSandbox(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI needs unshare (util-linux)")
		}
		t.Skip("no unshare:", err)
	}
	dir := initAgent(t)
	wd := t.TempDir()
	for _, c := range []struct {
		name, missing string
		// command is how capstan with args is started on the machine that
		// cannot sandbox.
		command func(args ...string) *exec.Cmd
	}{
		{"no user namespaces", "user namespaces are disabled or exhausted (ENOSPC from clone)", func(args ...string) *exec.Cmd {
			cmd := cliCommand(args...)
			cmd.Args = append([]string{unshare, "--user", "--map-root-user", "sh", "-c",
				`echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`}, cmd.Args...)
			cmd.Path = unshare
			return cmd
		}},
		{"no Landlock", "Landlock is not available", func(args ...string) *exec.Cmd {
			cmd := cliCommand(args...)
			cmd.Env = append(cmd.Env, "CAPSTAN_TEST_NO_LANDLOCK=1")
			return cmd
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.command("run", dir, "--workdir", wd)
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != exitUsage {
				t.Fatalf("exit %d (%v), want 2:\n%s", code, err, out)
			}
			text := string(out)
			if !strings.Contains(text, "SANDBOX_UNAVAILABLE: this machine cannot sandbox: "+c.missing) || strings.Contains(text, "capstan: running") {
				t.Fatalf("the error does not name what is missing, or the run started:\n%s", text)
			}
			m := regexp.MustCompile(`or run unsandboxed on purpose \([^)]*\): (capstan run .* --no-sandbox) \(or set`).FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("no opt-out command in:\n%s", text)
			}
			words := strings.Fields(m[1]) // the test's paths need no quotes
			pasted := c.command(words[1:]...)
			out, err = pasted.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "— unsandboxed (--no-sandbox)") || !strings.Contains(string(out), "COMPLETED") {
				t.Fatalf("the pasted opt-out %q did not run unsandboxed (%v):\n%s", m[1], err, out)
			}

			_, noSysctl := exec.LookPath("sysctl")
			if noSysctl != nil && os.Getenv("CI") != "" {
				t.Fatal("CI needs sysctl (procps) to paste the hint")
			}
			if c.name == "no user namespaces" && noSysctl != nil {
				t.Logf("not pasting the sysctl hint: %v", noSysctl)
			}
			if c.name == "no user namespaces" && noSysctl == nil {
				// The setting the hint names, changed as printed, makes
				// this machine sandbox again: the run completes sandboxed.
				fix := regexp.MustCompile(`hint: raise user\.max_user_namespaces \((sysctl -w [^)]*)\)`).FindStringSubmatch(text)
				if fix == nil {
					t.Fatalf("no sysctl to paste in:\n%s", text)
				}
				fixed := cliCommand("run", dir, "--workdir", wd)
				fixed.Args = append([]string{unshare, "--user", "--map-root-user", "sh", "-c",
					`echo 0 > /proc/sys/user/max_user_namespaces && ` + fix[1] + ` >/dev/null && exec "$0" "$@"`}, fixed.Args...)
				fixed.Path = unshare
				out, err := fixed.CombinedOutput()
				if err != nil || strings.Contains(string(out), "unsandboxed") || !strings.Contains(string(out), "COMPLETED") {
					t.Fatalf("after the pasted %q the run is not sandboxed and complete (%v):\n%s", fix[1], err, out)
				}
			}

			doctor := c.command("doctor")
			out, _ = doctor.CombinedOutput()
			if code := doctor.ProcessState.ExitCode(); code != exitNotCompleted ||
				!strings.HasPrefix(string(out), "FAIL  sandbox                this machine cannot sandbox: "+c.missing) ||
				!strings.Contains(string(out), "--no-sandbox") {
				t.Fatalf("doctor (exit %d) does not report the sandbox first:\n%s", code, out)
			}
		})
	}
}

// TestSandboxedRunAsNonRootUser runs an agent whose Bash tool writes
// outside its work dir as a user other than root (uid 65534 through
// setpriv when the test runs as root): the default sandbox works for an
// unprivileged user, and confines its commands — the write outside fails
// although that directory is the user's own.
func TestSandboxedRunAsNonRootUser(t *testing.T) {
	needSandbox(t)
	base, err := os.MkdirTemp("", "capstan-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	const uid = 65534
	var prefix []string // how capstan is started as the other user
	bin := os.Args[0]
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("CI needs setpriv (util-linux) to run capstan as a non-root user")
			}
			t.Skip("running as root without setpriv: cannot run as another user:", err)
		}
		prefix = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"}
		// The test binary's own folder is root's alone.
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(base, "capstan.test")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mine := func(name string) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(p, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	wd, outside, state, home := mine("work"), mine("outside"), mine("state"), mine("home")
	if code, _, errOut := captureConfigCLI(t, "init", "unpriv", "--dir", base); code != 0 {
		t.Fatalf("init exit %d: %s", code, errOut)
	}
	dir := filepath.Join(base, "unpriv")
	edit := func(name, old, new string) {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("%s: %q not found (%v)", name, old, err)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("agent.json", `"allowedTools": ["Read", "Write"]`, `"allowedTools": ["Read", "Write", "Bash"]`)
	edit("script.yaml", "    tool_calls:\n", "    tool_calls:\n      - name: Bash\n        input: {command: 'id -u > uid.txt; touch "+outside+"/escaped'}\n")
	args := append(append([]string{}, prefix...), bin, "-test.run=^$", "--", "run", dir, "--workdir", wd, "--json")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = base
	cmd.Env = []string{"CAPSTAN_TEST_CLI=1", "CAPSTAN_STATE_DIR=" + state, "HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	out, err := cmd.Output()
	var res struct {
		Success   bool
		Sandboxed *bool
	}
	if jerr := json.Unmarshal(out, &res); err != nil || jerr != nil || !res.Success || res.Sandboxed == nil || !*res.Sandboxed {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("run as uid %d: %v\n%s\n%s", uid, err, out, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "uid.txt")); err != nil || strings.TrimSpace(string(b)) != "65534" && os.Geteuid() == 0 {
		t.Fatalf("the Bash command did not run as uid %d: %q %v", uid, b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Fatal("the sandboxed Bash command wrote outside the work dir")
	}
}

// TestResumeDoesNotInheritNoSandbox: a run started with --no-sandbox and
// resumed without it continues sandboxed (the opt-out is the command
// line's, never read back from a journal); resumed with it again, it is
// unsandboxed and show says so.
func TestResumeDoesNotInheritNoSandbox(t *testing.T) {
	needSandbox(t)
	for _, again := range []bool{false, true} {
		wd := t.TempDir()
		code, out, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", wd, "--json", "--no-sandbox", "--max-iterations", "1")
		if code != exitNotCompleted {
			t.Fatalf("first run: exit %d\n%s\n%s", code, out, errOut)
		}
		var res struct {
			RunID     string `json:"runId"`
			Sandboxed bool
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sandboxed {
			t.Fatalf("first run: %v\n%s", err, out)
		}
		args := []string{"resume", res.RunID, "--json", "--max-iterations", "2"}
		if again {
			args = append(args, "--no-sandbox")
		}
		code, out, errOut = captureConfigCLI(t, args...)
		if code != 0 || !strings.Contains(out, `"sandboxed": `+map[bool]string{false: "true", true: "false"}[again]) {
			t.Fatalf("resume (--no-sandbox again: %v): exit %d\n%s\n%s", again, code, out, errOut)
		}
		// Unsandboxed once is unsandboxed for the run.
		if code, show, _ := captureConfigCLI(t, "show", res.RunID); code != 0 || !strings.Contains(show, "\nsandbox unsandboxed (--no-sandbox)") {
			t.Fatalf("show (exit %d):\n%s", code, show)
		}
	}
}
