package llm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/script"
	"github.com/capstan-dev/capstan/proc"
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
			redact = proc.SecretRedactor([]string{"A_API_KEY=sk-bench-0123456789", "GH_TOKEN=ghp_bench0123456789",
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
			var events event.Emitter = event.Discard
			if mode == "file" {
				w, err := journal.Create(work, "bench")
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				events = event.Journal{Writer: w}
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

// BenchmarkTurnOf2500Reads measures one model turn that makes 2,500 Read
// calls of a 100 KB file (and a final answer), journaled to a real run
// journal: "journal-MB" is the journal's size and "kept-MB" the tool
// results the turn put into the transcript. Bounded, 64 calls run and
// their results are kept to MaxTurnToolBytes; unbounded, every result was
// kept (250 MB in the transcript, over a gigabyte of journal).
func BenchmarkTurnOf2500Reads(b *testing.B) {
	var src strings.Builder
	src.WriteString("turns:\n  - text: reading\n    tool_calls:\n      - {name: Read, input: &r {file_path: big.txt}}\n")
	for range 2499 {
		src.WriteString("      - {name: Read, input: *r}\n")
	}
	src.WriteString("  - text: done\n")
	s, err := script.Parse("bench.yaml", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	line := strings.Repeat("x", 99) + "\n"
	if err := os.WriteFile(filepath.Join(work, "big.txt"), []byte(strings.Repeat(line, 1000)), 0o644); err != nil {
		b.Fatal(err)
	}
	tools, err := builtin.New(builtin.Config{WorkDir: work})
	if err != nil {
		b.Fatal(err)
	}
	var journalBytes, keptBytes float64
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w, err := journal.Create(work, fmt.Sprintf("bench-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		loop := llm.NewToolLoop(script.New(s), llm.Config{WorkDir: work, Tools: tools, Events: event.Journal{Writer: w}})
		res, err := loop.Query(context.Background(), "read it all", llm.QueryOptions{})
		if err != nil || res.Turns != 2 {
			b.Fatalf("turns %v, err %v", res, err)
		}
		kept := 0
		for _, u := range res.ToolUses {
			kept += len(u.Output)
		}
		w.Close()
		st, err := os.Stat(w.Path())
		if err != nil {
			b.Fatal(err)
		}
		journalBytes, keptBytes = float64(st.Size()), float64(kept)
		if err := os.Remove(w.Path()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(journalBytes/(1<<20), "journal-MB")
	b.ReportMetric(keptBytes/(1<<20), "kept-MB")
}
