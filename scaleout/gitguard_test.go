package scaleout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/api/serviceerror"

	"github.com/capstan-dev/capstan/agent"
)

// The run's checkout is the model's work dir, .git included: its Bash can
// write hooks and repository configuration there. The worker then runs
// git in that checkout with its own rights and environment (the API keys),
// so anything git would run on the model's say — hooks, core.fsmonitor, a
// filter, a receive-pack command — would run the model's code outside its
// sandbox. The worker's git runs none of it, and writes no file the model
// pointed a link in .git at (git writes its index through a link).
func TestTheWorkersGitRunsNoCodeTheModelPutInTheCheckout(t *testing.T) {
	marks := t.TempDir()
	mark := func(name string) string { return filepath.Join(marks, name) }
	hook := func(name string) string {
		return `printf '#!/bin/sh\ntouch ` + mark(name) + `\n' > .git/hooks/` + name + ` && chmod +x .git/hooks/` + name
	}
	attack := strings.Join([]string{
		"mkdir -p .git/hooks", // a checkout is cloned without the sample hooks
		hook("post-commit"), hook("pre-push"), hook("reference-transaction"), hook("post-checkout"), hook("pre-auto-gc"),
		`git config core.fsmonitor "touch ` + mark("fsmonitor") + `"`,
		`git config filter.x.clean "touch ` + mark("filter") + `; cat" && echo '* filter=x' > .gitattributes`,
		`git config remote.origin.receivepack "touch ` + mark("receivepack") + `; git-receive-pack"`,
		`git config remote.origin.uploadpack "touch ` + mark("uploadpack") + `; git-upload-pack"`,
		`rm -f .git/index && ln -s ` + mark("index") + ` .git/index`,
		`echo line-1 >> log.txt`,
	}, " && ")
	dir := t.TempDir()
	files := map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "hooker", "description": "plants code in its checkout's .git",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "hooker", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Iteration {uv-iteration}.",
		"script.yaml": "turns:\n  - tool_calls:\n      - name: Bash\n        input: {command: " + yamlString(attack) + "}\n  - text: planted\n" +
			"  - tool_calls:\n      - name: Bash\n        input: {command: \"echo line-2 >> log.txt\"}\n  - text: ALL_DONE\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	def, err := agent.LoadPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, bare := counterRun(t, WorkflowOptions{})
	in2, err := PrepareRun(context.Background(), Submission{Agent: def, WorkDir: filepath.Join(filepath.Dir(bare), "work"), Repo: "file://" + bare})
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t)
	// Iteration 2's first attempt is lost: its retry, on the same worker,
	// fetches and checks the checkout the model planted its code in.
	var lost atomic.Bool
	p.iterate = func(ctx context.Context, w *Activities, it IterationInput) (*IterationResult, error) {
		if it.State.Iteration == 1 && lost.CompareAndSwap(false, true) {
			zctx, cancel := context.WithCancelCause(ctx)
			cancel(serviceerror.NewNotFound("activity attempt timed out"))
			_, _ = w.Iterate(zctx, it)
		}
		return w.Iterate(ctx, it)
	}
	res := p.run(t, in2)
	if !res.Success || res.Iterations != 2 {
		t.Fatalf("result: %+v", res)
	}
	if got := gitT(t, bare, "show", in2.Branch+":log.txt"); got != "line-1\nline-2" {
		t.Errorf("log.txt on the run's branch: %q", got)
	}
	entries, _ := os.ReadDir(marks)
	for _, e := range entries {
		t.Errorf("the worker's git ran the model's %s", e.Name())
	}
}

// yamlString writes s as a YAML double-quoted scalar.
func yamlString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
