// Package modelspec is how an agent names a model: the model spec
// "provider:model" (Parse) and a model's price (Price, runner.pricing).
// It imports nothing of capstan, so the agent folder's loader (agentdir)
// reads these values without depending on the model layer (llm) that acts
// on them.
package modelspec

import "strings"

// Parse splits the model spec "provider:model" into its parts. The model
// part may itself contain colons (e.g. "openai:llama3.1:8b"); a bare
// "provider" has an empty model.
func Parse(spec string) (provider, model string) {
	provider, model, _ = strings.Cut(strings.TrimSpace(spec), ":")
	return provider, model
}
