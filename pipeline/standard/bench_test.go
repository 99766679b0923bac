package standard

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/pipeline"
)

// BenchmarkStandardPipeline runs the whole offline pipeline (two git log
// calls included) on the fixture repository.
func BenchmarkStandardPipeline(b *testing.B) {
	dir := testenv.MakeGitRepo(b, b.TempDir(), testenv.GitSteps())
	m, err := NewManager(pipeline.Config{Options: pipeline.DefaultExecutionOptions()}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	in, err := Input("summarize development activity", dir, "7d", testenv.GitHistoryNow())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Execute(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
