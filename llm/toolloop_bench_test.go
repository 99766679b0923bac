package llm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/script"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
)

// BenchmarkToolLoopTurn measures one query of the shared tool loop through
// the script provider: a Write tool call (a real atomic write in a temp
// dir, fsync included) and a final text answer, i.e. two model turns.
// "journal=file" also writes every event to a real run journal; "tool=Read"
// replaces the Write by a Read of the same file to show the loop's own cost
// without the fsync.
func BenchmarkToolLoopTurn(b *testing.B) {
	const src = `turns:
  - text: "writing"
    tool_calls:
      - name: %s
        input: {file_path: out/result.txt%s}
  - text: "done TASK_COMPLETE"
`
	for _, c := range []struct {
		name, tool, extra, journal string
		secrets                    bool
	}{
		{"tool=Write/journal=discard", "Write", `, content: "benchmark payload\n"`, "discard", false},
		{"tool=Write/journal=file", "Write", `, content: "benchmark payload\n"`, "file", false},
		{"tool=Read/journal=file", "Read", "", "file", false},
		// Three secret values to look for in every answer (none occurs).
		{"tool=Write/journal=discard/secrets=3", "Write", `, content: "benchmark payload\n"`, "discard", true},
	} {
		s, err := script.Parse("bench.yaml", []byte(fmt.Sprintf(src, c.tool, c.extra)))
		if err != nil {
			b.Fatal(err)
		}
		mode := c.journal
		var redact llm.Redactor
		if c.secrets {
			redact = builtin.SecretRedactor([]string{"A_API_KEY=sk-bench-0123456789", "GH_TOKEN=ghp_bench0123456789",
				"DATABASE_URL=postgres://u:bench-password@db/x"})
		}
		b.Run(c.name, func(b *testing.B) {
			work := b.TempDir()
			tools, err := builtin.New(builtin.Config{WorkDir: work})
			if err != nil {
				b.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(work, "out"), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "out/result.txt"), []byte("benchmark payload\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			var events journal.Emitter = journal.Discard
			if mode == "file" {
				w, err := journal.Create(work, "bench")
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				events = w
			}
			opts := llm.QueryOptions{PermissionMode: tool.ModeAcceptEdits}
			ctx := context.Background()
			var tokens int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				loop := llm.NewToolLoop(script.New(s), llm.Config{WorkDir: work, Tools: tools, Events: events, Redact: redact})
				res, err := loop.Query(ctx, fmt.Sprintf("write the result, attempt %d", i), opts)
				if err != nil || res.Turns != 2 {
					b.Fatalf("%v %+v", err, res)
				}
				tokens += res.Usage.Total()
			}
			b.ReportMetric(float64(tokens)/float64(b.N), "tokens/op")
		})
	}
}
