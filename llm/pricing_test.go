package llm_test

import (
	"math"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/modelspec"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestCostOfKnownModels(t *testing.T) {
	u := event.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 2_000_000, CacheWriteTokens: 400_000}
	for model, want := range map[string]float64{
		// 1M in ×2 + 0.1M out ×10 + 2M read ×0.20 + 0.4M write ×2.50
		"claude-sonnet-5":            2 + 1 + 0.4 + 1,
		"anthropic:claude-sonnet-5":  2 + 1 + 0.4 + 1,
		"claude-sonnet-4-5-20250929": 3 + 1.5 + 0.6 + 1.5,
		"claude-opus-5-5[1m]":        4 + 2 + 0.4 + 2,
		"openai/gpt-4o-2024-08-06":   2.5 + 1 + 2.5 + 1, // writes without a write rate cost plain input
		"GPT-6-Luna":                 0.1 + 0.05 + 0.02 + 0.05,
	} {
		got, ok := llm.Cost(model, u)
		if !ok || !near(got, want) {
			t.Errorf("%s: cost = %v (%v), want %v", model, got, ok, want)
		}
	}
}

func TestUnknownModelIsZeroNotError(t *testing.T) {
	got, ok := llm.Cost("llama3.1:8b", event.Usage{InputTokens: 5000, OutputTokens: 5000})
	if ok || got != 0 {
		t.Fatalf("cost = %v, %v", got, ok)
	}
	if got, ok := llm.Cost("", event.Usage{}); ok || got != 0 {
		t.Fatalf("empty model: %v %v", got, ok)
	}
}

func TestOverridesReplaceAndExtend(t *testing.T) {
	tab := llm.NewPriceTable(map[string]modelspec.Price{
		"llama3.1:8b":                 {Input: 0, Output: 0},
		"claude-sonnet-5":             {Input: 1, Output: 1},
		"My-Gateway/Model-X-20250101": {Input: 10, Output: 20},
	})
	u := event.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}
	if got, ok := tab.Cost("llama3.1:8b", u); !ok || got != 0 {
		t.Errorf("local model: %v %v", got, ok)
	}
	if got, _ := tab.Cost("claude-sonnet-5", u); got != 2 {
		t.Errorf("override not applied: %v", got)
	}
	if got, ok := tab.Cost("model-x", u); !ok || got != 30 {
		t.Errorf("normalized override: %v %v", got, ok)
	}
	// The default table is untouched by overrides.
	if got, _ := llm.Cost("claude-sonnet-5", u); got != 12 {
		t.Errorf("default table changed: %v", got)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"claude-haiku-4-5-20251001": "claude-haiku-4-5",
		"gpt-4o-mini-2024-07-18":    "gpt-4o-mini",
		" OpenAI:GPT-4.1 ":          "gpt-4.1",
		"claude-opus-5-5[1m]":       "claude-opus-5-5",
		"gpt-5":                     "gpt-5",
	} {
		if got := llm.NormalizeModel(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCost(f *testing.F) {
	f.Add("claude-sonnet-5", int64(10), int64(5))
	f.Add("x:y/z[1m]-20250101", int64(-1), int64(1<<40))
	f.Fuzz(func(t *testing.T, model string, in, out int64) {
		usd, ok := llm.Cost(model, event.Usage{InputTokens: in, OutputTokens: out})
		if !ok && usd != 0 {
			t.Fatalf("unknown model with cost %v", usd)
		}
	})
}

func TestLimitsOfKnownAndUnknownModels(t *testing.T) {
	l, ok := llm.ModelLimitsOf("anthropic:claude-haiku-4-5-20251001")
	if !ok || l.ContextWindow != 200_000 || l.MinCacheable != 4096 {
		t.Fatalf("haiku 4.5 = %+v %v", l, ok)
	}
	l, ok = llm.ModelLimitsOf("llama3.1:8b")
	if ok || l.ContextWindow != 0 || l.MinCacheable != llm.DefaultMinCacheable {
		t.Fatalf("unknown model = %+v %v", l, ok)
	}
}

// A table without overrides is the built-in one, shared; a table with
// overrides made after it does not change it, nor does it change the
// table with overrides.
func TestTableWithoutOverridesIsSharedAndUnchanged(t *testing.T) {
	u := event.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}
	plain := llm.NewPriceTable(nil)
	if n := testing.AllocsPerRun(10, func() { _ = llm.NewPriceTable(map[string]modelspec.Price{}) }); n != 0 {
		t.Errorf("a table without overrides allocates %.0f times", n)
	}
	over := llm.NewPriceTable(map[string]modelspec.Price{"claude-sonnet-5": {Input: 1, Output: 1}, "new-model": {Input: 1}})
	if got, _ := plain.Cost("claude-sonnet-5", u); got != 12 {
		t.Errorf("built-in table after an override: %v", got)
	}
	if _, ok := plain.Lookup("new-model"); ok {
		t.Error("an override reached the built-in table")
	}
	if got, _ := over.Cost("claude-sonnet-5", u); got != 2 {
		t.Errorf("override: %v", got)
	}
	if len(llm.DefaultPrices().Models()) != len(plain.Models()) || len(over.Models()) != len(plain.Models())+1 {
		t.Errorf("models: default %d, plain %d, with overrides %d", len(llm.DefaultPrices().Models()), len(plain.Models()), len(over.Models()))
	}
}
