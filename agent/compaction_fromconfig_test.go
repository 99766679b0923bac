package agent

import (
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/llm"
)

func TestFromConfigReadsEverySetting(t *testing.T) {
	off, zero := false, 0
	o := compactionOptions(9000, &agentdir.Compaction{Enabled: &off, Threshold: 0.8, Target: 0.4, KeepToolResults: &zero, SummaryModel: "anthropic:claude-haiku-4-5"})
	want := llm.CompactionOptions{Window: 9000, Disabled: true, Threshold: 0.8, Target: 0.4, KeepToolResults: -1, SummaryModel: "anthropic:claude-haiku-4-5"}
	if o != want {
		t.Fatalf("options = %+v, want %+v", o, want)
	}
	if o := compactionOptions(0, nil); o != (llm.CompactionOptions{}) {
		t.Fatalf("defaults = %+v", o)
	}
}
