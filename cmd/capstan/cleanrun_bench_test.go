package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/sandbox"
)

// BenchmarkCleanRun runs examples/fix-failing-test end to end (three
// iterations, one verified completion) with runner.verification.cleanRun
// on and off, sandboxed and not, side by side, and reports:
//
//	run-ms    the whole run's wall time
//	clean-ms  the clean run of the test validator after the last turn
//	          (verify.clean's durationMs; 0 when off)
func BenchmarkCleanRun(b *testing.B) {
	for _, tool := range []string{"git", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not on PATH", tool)
		}
	}
	for _, sandboxed := range []bool{false, true} {
		for _, on := range []bool{true, false} {
			name := map[bool]string{true: "sandbox", false: "no-sandbox"}[sandboxed] + "/" + map[bool]string{true: "on", false: "off"}[on]
			b.Run(name, func(b *testing.B) {
				if sandboxed && sandbox.Probe(b.Context()).Unavailable() != nil {
					b.Skip("this machine cannot sandbox")
				}
				dir := b.TempDir()
				if err := os.CopyFS(dir, os.DirFS("../../examples/fix-failing-test")); err != nil {
					b.Fatal(err)
				}
				setCleanRun(b, filepath.Join(dir, "agent.json"), on)
				var runMs, cleanMs float64
				for i := 0; i < b.N; i++ {
					wd := b.TempDir()
					if out, err := exec.Command("bash", "../../examples/fix-failing-test/prepare.sh", wd).CombinedOutput(); err != nil {
						b.Fatalf("prepare.sh: %v\n%s", err, out)
					}
					args := []string{"run", dir, "--workdir", wd, "--quiet", "--json"}
					if !sandboxed {
						args = append(args, "--no-sandbox")
					}
					code, out, errOut := captureConfigCLI(b, args...)
					if code != 0 {
						b.Fatalf("exit %d\n%s\n%s", code, out, errOut)
					}
					var res event.RunResult
					if err := json.Unmarshal([]byte(out), &res); err != nil {
						b.Fatal(err)
					}
					runMs += float64(res.DurationMs)
					events, _ := journal.ReadFile(res.Journal)
					for _, ev := range events {
						if ev.Type == string(event.KindCleanRun) {
							var c event.CleanRunEvent
							_ = json.Unmarshal(ev.Data, &c)
							cleanMs += float64(c.DurationMs)
						}
					}
				}
				b.ReportMetric(runMs/float64(b.N), "run-ms")
				b.ReportMetric(cleanMs/float64(b.N), "clean-ms")
			})
		}
	}
}

// setCleanRun sets runner.verification.cleanRun in the agent.json at p.
func setCleanRun(b *testing.B, p string, on bool) {
	data, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		b.Fatal(err)
	}
	doc["runner"].(map[string]any)["verification"].(map[string]any)["cleanRun"] = on
	out, _ := json.Marshal(doc)
	if err := os.WriteFile(p, out, 0o644); err != nil {
		b.Fatal(err)
	}
}
