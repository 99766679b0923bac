package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm/script"
)

// BenchmarkFixFailingTestExample runs examples/fix-failing-test end to end
// and reports what a targeted retry costs against the alternative of
// re-sending the full step prompt with the validators' raw output:
//
//	step-prompt-tok   the step prompt (what a full re-prompt starts from)
//	retry-prompt-tok  mean size of the two targeted retry prompts sent
//	full-reprompt-tok step prompt + raw output of every validator, the
//	                  naive way to tell the model what failed
//	validator-ms/iter wall time of the completion validators per iteration
//
// Tokens are estimated as the script provider estimates them (≈ chars/4).
func BenchmarkFixFailingTestExample(b *testing.B) {
	for _, tool := range []string{"git", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not on PATH", tool)
		}
	}
	var stepTok, retryTok, fullTok, validatorMs, iterations float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		wd := b.TempDir()
		if out, err := exec.Command("bash", "../../examples/fix-failing-test/prepare.sh", wd).CombinedOutput(); err != nil {
			b.Fatalf("prepare.sh: %v\n%s", err, out)
		}
		b.StartTimer()
		code := execute(b.Context(), []string{"run", "../../examples/fix-failing-test", "--workdir", wd, "--quiet"})
		b.StopTimer()
		if code != 0 {
			b.Fatalf("exit %d", code)
		}
		store, _ := journal.OpenStore(os.Getenv)
		runs, _ := store.List(wd)
		rec, err := agent.LoadRun(runs[0].ID, runs[0].Path)
		if err != nil {
			b.Fatal(err)
		}
		events, _ := journal.ReadFile(runs[0].Path)
		var rawOutputs strings.Builder
		var retries []string
		for _, ev := range events {
			switch ev.Type {
			case journal.ValidatorResult:
				var v completion.ValidatorEvent
				_ = json.Unmarshal(ev.Data, &v)
				validatorMs += float64(v.DurationMs)
			case journal.RetryPrompt:
				var rp agent.RetryPromptEvent
				_ = json.Unmarshal(ev.Data, &rp)
				retries = append(retries, rp.Text)
				for _, p := range rp.Params {
					if s, ok := p.(string); ok {
						rawOutputs.WriteString(s)
					} else {
						raw, _ := json.Marshal(p)
						rawOutputs.Write(raw)
					}
				}
			}
		}
		step := rec.Iterations[0].Prompt
		stepTok += float64(script.EstimateTokens(len(step)))
		fullTok += float64(script.EstimateTokens(len(step) + rawOutputs.Len()/len(retries)))
		for _, r := range retries {
			retryTok += float64(script.EstimateTokens(len(r))) / float64(len(retries))
		}
		iterations += float64(len(rec.Iterations))
	}
	n := float64(b.N)
	b.ReportMetric(stepTok/n, "step-prompt-tok")
	b.ReportMetric(retryTok/n, "retry-prompt-tok")
	b.ReportMetric(fullTok/n, "full-reprompt-tok")
	b.ReportMetric(validatorMs/iterations, "validator-ms/iter")
}
