package llm

// ModelLimits are the size limits of a model that capstan plans requests
// around.
type ModelLimits struct {
	// ContextWindow is the most input (prompt plus transcript) the model
	// accepts, in tokens; 0 = not known.
	ContextWindow int64
	// MinCacheable is the shortest prefix, in tokens, that the provider's
	// prompt cache stores (Anthropic: shorter prefixes are silently not
	// cached; OpenAI: automatic caching starts at 1,024 tokens).
	MinCacheable int64
}

// DefaultMinCacheable is the minimum cacheable prefix assumed for a model
// the table does not list (the most common Anthropic and OpenAI figure).
const DefaultMinCacheable = 1024

// builtinLimits, checked on PriceTableDate against the providers' model pages
// (Anthropic models overview and prompt-caching pages; OpenAI model pages).
var builtinLimits = map[string]ModelLimits{
	"claude-fable-5":    {ContextWindow: 1_000_000, MinCacheable: 512},
	"claude-mythos-5":   {ContextWindow: 1_000_000, MinCacheable: 512},
	"claude-opus-5-5":   {ContextWindow: 1_000_000, MinCacheable: 1024},
	"claude-opus-5":     {ContextWindow: 1_000_000, MinCacheable: 512},
	"claude-opus-4-8":   {ContextWindow: 1_000_000, MinCacheable: 1024},
	"claude-opus-4-7":   {ContextWindow: 1_000_000, MinCacheable: 2048},
	"claude-opus-4-6":   {ContextWindow: 1_000_000, MinCacheable: 4096},
	"claude-opus-4-5":   {ContextWindow: 200_000, MinCacheable: 4096},
	"claude-opus-4-1":   {ContextWindow: 200_000, MinCacheable: 1024},
	"claude-sonnet-5-5": {ContextWindow: 1_000_000, MinCacheable: 1024},
	"claude-sonnet-5":   {ContextWindow: 1_000_000, MinCacheable: 1024},
	"claude-sonnet-4-6": {ContextWindow: 1_000_000, MinCacheable: 1024},
	"claude-sonnet-4-5": {ContextWindow: 200_000, MinCacheable: 1024},
	"claude-haiku-4-5":  {ContextWindow: 200_000, MinCacheable: 4096},
	"gpt-5":             {ContextWindow: 400_000, MinCacheable: 1024},
	"gpt-5-mini":        {ContextWindow: 400_000, MinCacheable: 1024},
	"gpt-4.1":           {ContextWindow: 1_047_576, MinCacheable: 1024},
	"gpt-4.1-mini":      {ContextWindow: 1_047_576, MinCacheable: 1024},
	"gpt-4.1-nano":      {ContextWindow: 1_047_576, MinCacheable: 1024},
	"gpt-4o":            {ContextWindow: 128_000, MinCacheable: 1024},
	"gpt-4o-mini":       {ContextWindow: 128_000, MinCacheable: 1024},
}

// ModelLimitsOf returns the limits of a model (any spelling NormalizeModel accepts).
// A model the table does not list has ContextWindow 0 (unknown) and
// DefaultMinCacheable; known reports whether it was listed.
func ModelLimitsOf(model string) (l ModelLimits, known bool) {
	if l, ok := builtinLimits[model]; ok {
		return l, true
	}
	if l, ok := builtinLimits[NormalizeModel(model)]; ok {
		return l, true
	}
	return ModelLimits{MinCacheable: DefaultMinCacheable}, false
}
