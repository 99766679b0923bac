package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/event"
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
//	journal-B/failing bytes of journal lines per iteration a validator
//	                  failed in (the two retried iterations)
//	journal-B/passing bytes of journal lines of the iteration whose
//	                  validators all passed (run.end left out)
//
// Tokens are estimated as the script provider estimates them (≈ chars/4).
func BenchmarkFixFailingTestExample(b *testing.B) {
	for _, tool := range []string{"git", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not on PATH", tool)
		}
	}
	var stepTok, retryTok, fullTok, validatorMs, iterations float64
	var failingBytes, failingIters, passingBytes, passingIters float64
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
				var v event.ValidatorEvent
				_ = json.Unmarshal(ev.Data, &v)
				validatorMs += float64(v.DurationMs)
			case journal.RetryPrompt:
				var rp event.RetryPromptEvent
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
		f, p, nf, np := journalBytesByOutcome(b, runs[0].Path)
		failingBytes, passingBytes, failingIters, passingIters = failingBytes+f, passingBytes+p, failingIters+nf, passingIters+np
	}
	n := float64(b.N)
	b.ReportMetric(stepTok/n, "step-prompt-tok")
	b.ReportMetric(retryTok/n, "retry-prompt-tok")
	b.ReportMetric(fullTok/n, "full-reprompt-tok")
	b.ReportMetric(validatorMs/iterations, "validator-ms/iter")
	b.ReportMetric(failingBytes/failingIters, "journal-B/failing")
	b.ReportMetric(passingBytes/passingIters, "journal-B/passing")
}

// journalBytesByOutcome sums the lengths of the journal's lines by
// iteration (run.end, which ends the run rather than an iteration, left
// out) and returns the bytes of the iterations a validator failed in and
// of those it did not, with their numbers.
func journalBytesByOutcome(b *testing.B, path string) (failing, passing, nFailing, nPassing float64) {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	size := map[int]int{}
	failed := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev struct {
			Type      string `json:"type"`
			Iteration int    `json:"iteration"`
			Data      struct {
				Valid *bool `json:"valid"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			b.Fatal(err)
		}
		if ev.Iteration == 0 || ev.Type == journal.RunEnd {
			continue
		}
		size[ev.Iteration] += len(line) + 1
		if ev.Type == journal.ValidatorResult && ev.Data.Valid != nil && !*ev.Data.Valid {
			failed[ev.Iteration] = true
		}
	}
	for it, n := range size {
		if failed[it] {
			failing, nFailing = failing+float64(n), nFailing+1
		} else {
			passing, nPassing = passing+float64(n), nPassing+1
		}
	}
	return failing, passing, nFailing, nPassing
}
