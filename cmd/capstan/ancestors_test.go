package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/sandbox"
)

// ancestorKey is the provider key the processes above capstan hold in
// these tests.
const ancestorKey = "sk-ant-ancestor-0123456789abcdef"

// ancestorProbe walks up its ancestors and then every process it can
// see, printing the provider variables of each environment block reversed
// (redaction by value cannot catch a reversed key): what a model's Bash
// would do to find the key.
const ancestorProbe = `{ p=$$; while [ "$p" -gt 1 ]; do tr '\0' '\n' < /proc/$p/environ; p=$(awk '{print $4}' /proc/$p/stat); done; ` +
	`for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done; } 2>/dev/null | grep -a '^ANTHROPIC' | rev; echo PROBE-END`

// probeAgent is an agent whose scripted model runs ancestorProbe in Bash;
// sandbox is the runner.boundaries.sandbox value ("" for none: sandboxed, the default).
func probeAgent(t *testing.T, sandboxJSON string) string {
	t.Helper()
	boundaries := `"allowedTools": ["Bash"], "permissionMode": "default"`
	if sandboxJSON != "" {
		boundaries += `, "sandbox": ` + sandboxJSON
	}
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "anc", "description": "looks above capstan",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {` + boundaries + `}}}`,
		"steps_registry.json":                  `{"agentId": "anc", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Look around.",
		"script.yaml":                          "turns:\n  - tool_calls: [{name: Bash, input: {command: " + jsonString(ancestorProbe) + "}}]\n  - text: \"ALL_DONE\"\n",
	})
}

// underKeyedAncestors runs the shell command line under `bash -c` and
// `timeout`, both started with ANTHROPIC_API_KEY in their environment —
// as `ANTHROPIC_API_KEY=… timeout 100 capstan run A` in a CI step does.
func underKeyedAncestors(t *testing.T, line string, state string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("timeout is not installed")
	}
	// "; exit" keeps bash from replacing itself with timeout.
	cmd := exec.Command("bash", "-c", "timeout 300 "+line+"; exit $?")
	cmd.Env = append(os.Environ(), "CAPSTAN_TEST_CLI=1", "ANTHROPIC_API_KEY="+ancestorKey,
		"HOME="+state, "CAPSTAN_STATE_DIR="+filepath.Join(state, "state"), "XDG_STATE_HOME="+filepath.Join(state, "state"))
	return cmd
}

// cliLine is the shell command line of the test binary acting as capstan
// with args.
func cliLine(args ...string) string {
	words := []string{shellQuote(os.Args[0]), shellQuote("-test.run=^$"), "--"}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// filesHolding reports the files under roots that contain s.
func filesHolding(roots []string, s string) []string {
	var out []string
	for _, root := range roots {
		_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), s) {
					out = append(out, p)
				}
			}
			return nil
		})
	}
	return out
}

// TestUnsandboxedRunRefusesAKeyInAnAncestor: `timeout` and `bash -c`
// above capstan hold the provider key, and the agent's tools are not
// sandboxed: the run is refused before anything runs (exit 2,
// KEY_IN_ANCESTOR), naming the processes, the safer alternative and the
// flag. The command it prints, pasted under the same ancestors, runs —
// and its Bash can then read the key from the ancestors' environment
// (reversed, past redaction), which is what the refusal is about.
func TestUnsandboxedRunRefusesAKeyInAnAncestor(t *testing.T) {
	dir, wd, state := probeAgent(t, `{"enabled": false}`), t.TempDir(), t.TempDir()
	cmd := underKeyedAncestors(t, cliLine("run", dir, "--workdir", wd), state)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("exit %d (%v), want 2:\n%s", code, err, out)
	}
	text := string(out)
	for _, want := range []string{"KEY_IN_ANCESTOR", "ANTHROPIC_API_KEY of process", "(timeout)", "(bash)", `drop --no-sandbox, or "enabled": false`, "--allow-key-in-ancestors"} {
		if !strings.Contains(text, want) {
			t.Errorf("refusal lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "PROBE-END") || len(filesHolding([]string{wd, state}, "PROBE-END")) > 0 {
		t.Fatalf("the model ran before the refusal:\n%s", text)
	}
	_, pasted, ok := strings.Cut(text, "to run unsandboxed anyway: ")
	if !ok {
		t.Fatalf("no command to paste:\n%s", text)
	}
	pasted, _, _ = strings.Cut(pasted, "\n")
	if !strings.Contains(pasted, "--allow-key-in-ancestors") {
		t.Fatalf("pasted command %q lacks the flag", pasted)
	}
	again := underKeyedAncestors(t, pasted, state)
	out, err = again.CombinedOutput()
	if err != nil {
		t.Fatalf("the pasted command %s failed: %v\n%s", pasted, err, out)
	}
	if len(filesHolding([]string{wd, state}, "PROBE-END")) == 0 {
		t.Fatalf("the probe did not run:\n%s", out)
	}
	if len(filesHolding([]string{wd, state}, reverse(ancestorKey))) == 0 {
		t.Errorf("allowed unsandboxed, the model did not read the ancestors' key: the documented exposure did not happen")
	}
}

// TestSandboxedRunSeesNoAncestor: the same ancestors holding the key, but
// the agent's tools are sandboxed: the run starts, and its Bash, walking
// every /proc/<pid>/environ it can, finds no key — the PID namespace shows
// it none of capstan's ancestors and Landlock keeps /proc of the outer
// namespace out of reach.
func TestSandboxedRunSeesNoAncestor(t *testing.T) {
	if err := sandbox.Probe(t.Context()).Unavailable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("sandbox unavailable in CI: %v", err)
		}
		t.Skipf("sandbox unavailable: %v", err)
	}
	dir, wd, state := probeAgent(t, ""), t.TempDir(), t.TempDir()
	cmd := underKeyedAncestors(t, cliLine("run", dir, "--workdir", wd), state)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sandboxed run: %v\n%s", err, out)
	}
	if len(filesHolding([]string{wd, state}, "PROBE-END")) == 0 {
		t.Fatalf("the probe's output was not recorded:\n%s", out)
	}
	for _, s := range []string{ancestorKey, reverse(ancestorKey)} {
		if f := filesHolding([]string{wd, state}, s); len(f) > 0 || strings.Contains(string(out), s) {
			t.Errorf("the sandboxed model reached the ancestors' key: %v", f)
		}
	}
}

// refusedThenPasted runs line under keyed ancestors in dir (with extra
// environment), wants KEY_IN_ANCESTOR (exit 2) with nothing run, then
// pastes the command the refusal prints, under the same ancestors, and
// returns its output: the refusal's way through works as printed.
func refusedThenPasted(t *testing.T, dir, line string, extra ...string) string {
	t.Helper()
	state := t.TempDir()
	cmd := underKeyedAncestors(t, line, state)
	cmd.Dir, cmd.Env = dir, append(cmd.Env, extra...)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "KEY_IN_ANCESTOR") || !strings.Contains(string(out), "(timeout)") {
		t.Fatalf("exit %d (%v), want 2 with KEY_IN_ANCESTOR:\n%s", code, err, out)
	}
	// From the error line on stderr (--json output quotes it too).
	var pasted string
	for _, l := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(l, "to run unsandboxed anyway: "); ok && strings.HasPrefix(l, "capstan: ") {
			pasted = rest
		}
	}
	if pasted == "" {
		t.Fatalf("no command to paste:\n%s", out)
	}
	again := underKeyedAncestors(t, pasted, state)
	again.Dir, again.Env = dir, append(again.Env, extra...)
	out, err = again.CombinedOutput()
	if err != nil {
		t.Fatalf("the pasted command %s failed: %v\n%s", pasted, err, out)
	}
	return string(out)
}

// TestPipelineRunChecksKeyedAncestors: capstan pipeline run --no-sandbox
// under processes holding the provider key is refused before any stage
// runs; so is an agent stage that opts out of the sandbox by itself, when
// it starts. The printed command, pasted, runs the pipeline.
func TestPipelineRunChecksKeyedAncestors(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		optIn func(files map[string]string)
	}{
		{"--no-sandbox", []string{"pipeline", "run", "--file", "p.yaml", "--json", "--no-sandbox", "kites"}, func(map[string]string) {}},
		{"agent opts out", []string{"pipeline", "run", "--file", "p.yaml", "--json", "kites"}, func(files map[string]string) {
			files["agents/writer/agent.json"] = strings.Replace(files["agents/writer/agent.json"], `"runner": {`,
				`"runner": {"boundaries": {"sandbox": {"enabled": false}}, `, 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := withWriterAgent("kites", "Kites fly", map[string]string{"p.yaml": writerPipeline})
			c.optIn(files)
			dir := writeFiles(t, files)
			if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
				t.Skipf("git init: %v %s", err, out)
			}
			out := refusedThenPasted(t, dir, cliLine(c.args...))
			if !strings.Contains(out, "Kites fly") {
				t.Errorf("the pasted pipeline run did not run its stage:\n%s", out)
			}
		})
	}
}

// TestSkillsRunChecksKeyedAncestors: on a machine that cannot sandbox,
// skills run --allow-unsandboxed runs scripts that could read the
// ancestors' environment: it is refused while they hold the key, and the
// printed command, pasted, runs the skill.
func TestSkillsRunChecksKeyedAncestors(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	args := exampleSkillArgs(t, dir, t.TempDir(), "--fresh")
	if !strings.Contains(strings.Join(args, " "), "--allow-unsandboxed") {
		args = append(args, "--allow-unsandboxed")
	}
	// CAPSTAN_TEST_NO_LANDLOCK: the kernel refuses Landlock, so this
	// machine cannot sandbox.
	out := refusedThenPasted(t, dir, cliLine(args...), "CAPSTAN_TEST_NO_LANDLOCK=1")
	if !strings.Contains(out, "summary.md") {
		t.Errorf("the pasted skills run did not run:\n%s", out)
	}
}
