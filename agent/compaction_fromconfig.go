package agent

import (
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/llm"
)

// FromConfig reads agent.json's runner.contextWindow and
// runner.compaction.
func compactionOptions(window int64, c *agentdir.Compaction) llm.CompactionOptions {
	o := llm.CompactionOptions{Window: window}
	if c != nil {
		o.Disabled = c.Enabled != nil && !*c.Enabled
		o.Threshold, o.Target = c.Threshold, c.Target
		if k := c.KeepToolResults; k != nil {
			o.KeepToolResults = *k
			if *k == 0 {
				o.KeepToolResults = -1 // none
			}
		}
		o.SummaryModel = c.SummaryModel
	}
	return o
}
