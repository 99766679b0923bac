package standard

import (
	"github.com/capstan-dev/capstan/pipeline"
)

const modelSystem = "You are one stage of a reasoning pipeline that analyses the commit history of a git repository. " +
	"Answer with one JSON object matching the given schema and nothing else."

const intentPrompt = `Detect the intents of this request about a git repository, with a confidence between 0 and 1 each.
Known intent types: activity_summary, query_commits, query_authors, query_changes (use another short snake_case type if none fits).
Entities: if the request names a time window, set entities.time_window to "Nd" (days), "Nw" (weeks), "Nh" (hours), "Nm" (calendar months), "Ny" (years) or "YYYY-MM-DD"; otherwise return an empty entities object.

Request: {{input.request}}

Reply with {"intents": [{"type": "...", "confidence": 0.9}], "entities": {...}}.`

const inferencePrompt = `Draw conclusions about the development activity from these facts. Every conclusion must list, in "evidence",
the ids of the facts it rests on, and every number it states must be the value of one of those facts. Do not compute new numbers
(no percentages, averages or differences).

Request: {{input.request}}

Hypotheses:
{{json reasoning.hypotheses}}

Facts:
{{json enrichment.facts}}

Reply with {"conclusions": [{"id": "c1", "description": "...", "confidence": 0.9, "evidence": ["F1"]}],
"inference_chain": [{"step": 1, "from": ["h1", "F1"], "conclusion": "c1", "rule": "..."}]}.`

const summaryPrompt = `Write a short summary (at most 12 lines) of the development activity for the request below, using only these facts
and conclusions. Cite fact ids in square brackets after each statement, e.g. "6 commits by 4 authors [F1, F2]". Every number you write
must be the value of a fact; do not compute new numbers.

Request: {{input.request}}

Facts:
{{json enrichment.facts}}

Conclusions:
{{json reasoning.conclusions}}

Reply with {"summary": "..."}.`

func modelStage(cfg Config, id string, pre, post, opt []string, prompt string) (*pipeline.ModelStage, error) {
	return pipeline.NewModelStage(pipeline.ModelStageConfig{
		Contract:  pipeline.Contract{ID: id, Pre: pre, Post: post, Optional: opt, Keys: keysFor(pre, post, opt)},
		Model:     cfg.Model,
		ModelName: cfg.ModelName,
		System:    modelSystem,
		Prompt:    prompt,
		MaxTokens: cfg.MaxTokens,
	})
}

func modelIntent(cfg Config) (pipeline.ReasoningAgent, error) {
	return modelStage(cfg, IntentDetection, nil, []string{KeyIntents, KeyEntities}, nil, intentPrompt)
}

func modelInference(cfg Config) (pipeline.ReasoningAgent, error) {
	return modelStage(cfg, Inference, []string{KeyHypotheses, KeyFacts}, []string{KeyConclusions, KeyInferenceChain}, nil, inferencePrompt)
}

func modelSummary(cfg Config) (pipeline.ReasoningAgent, error) {
	return modelStage(cfg, Summarization, []string{KeyConclusions, KeyFacts}, []string{KeySummary}, nil, summaryPrompt)
}
