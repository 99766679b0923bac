// Pricing turns token usage into US dollars with a per-model price table
// (USD per million tokens for input, output, cache reads and cache
// writes). The built-in table covers current Anthropic and OpenAI models as
// published on PriceTableDate; agent.json's runner.pricing overrides or
// extends it. An unknown model is never an error: its cost is 0 and known
// is false, so callers can show "cost unknown" instead of a wrong number.

package llm

import (
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/llm/modelspec"
)

// PriceTableDate is when the built-in prices were checked against the
// providers' published price lists.
const PriceTableDate = "2026-11-21"

// builtinPrices:, USD per million tokens, standard tier, default
// (5-minute) cache writes, short-context rates.
//
// Sources: platform.claude.com model overviews and pricing page (Fable
// 5.1, Opus 5.5, Opus 5, Sonnet 5.5, Sonnet 5, Haiku 4.5 and older);
// OpenAI's pricing page and model pages as reported on 2026-09-22 (GPT-6
// Sol/Luna) and 2026-10-01 (GPT-6.1 Sol); older OpenAI models from their
// long-standing list prices.
var builtinPrices = map[string]modelspec.Price{
	// Anthropic
	"claude-fable-5-1":  {Input: 10, Output: 50, CacheRead: 0.25, CacheWrite: 12.50},
	"claude-mythos-5-1": {Input: 10, Output: 50, CacheRead: 0.25, CacheWrite: 12.50},
	"claude-fable-5":    {Input: 10, Output: 50, CacheRead: 1, CacheWrite: 12.50},
	"claude-mythos-5":   {Input: 10, Output: 50, CacheRead: 1, CacheWrite: 12.50},
	"claude-opus-5-5":   {Input: 4, Output: 20, CacheRead: 0.20, CacheWrite: 5},
	"claude-opus-5":     {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-opus-4-8":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-opus-4-7":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-opus-4-6":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-opus-4-0":   {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-sonnet-5-5": {Input: 2, Output: 10, CacheRead: 0.20, CacheWrite: 2.50},
	"claude-sonnet-5":   {Input: 2, Output: 10, CacheRead: 0.20, CacheWrite: 2.50},
	"claude-sonnet-4-6": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-sonnet-4-0": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	"claude-3-haiku":    {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.30},
	// OpenAI (cache writes are not billed separately except where listed)
	"gpt-6-sol":    {Input: 2, Output: 10, CacheRead: 0.20, CacheWrite: 2.50},
	"gpt-6-luna":   {Input: 0.10, Output: 0.50, CacheRead: 0.01, CacheWrite: 0.125},
	"gpt-6.1-sol":  {Input: 2, Output: 10, CacheRead: 0.10},
	"gpt-5":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini":   {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-4.1":      {Input: 2, Output: 8, CacheRead: 0.50},
	"gpt-4.1-mini": {Input: 0.40, Output: 1.60, CacheRead: 0.10},
	"gpt-4.1-nano": {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"gpt-4o":       {Input: 2.50, Output: 10, CacheRead: 1.25},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.60, CacheRead: 0.075},
}

// PriceTable is a price table keyed by model id.
type PriceTable struct {
	prices map[string]modelspec.Price
}

// DefaultPrices returns the built-in table.
func DefaultPrices() PriceTable { return NewPriceTable(nil) }

// NewPriceTable returns the built-in table with overrides (runner.pricing) applied on
// top: an override replaces the built-in entry of the same model. Without
// overrides it is the built-in table itself, shared (a PriceTable is
// read-only): every run prices with it.
func NewPriceTable(overrides map[string]modelspec.Price) PriceTable {
	if len(overrides) == 0 {
		return PriceTable{prices: builtinPrices}
	}
	t := PriceTable{prices: make(map[string]modelspec.Price, len(builtinPrices)+len(overrides))}
	for k, v := range builtinPrices {
		t.prices[k] = v
	}
	for k, v := range overrides {
		t.prices[NormalizeModel(k)] = v
	}
	return t
}

// Models lists the models the table prices.
func (t PriceTable) Models() []string {
	out := make([]string, 0, len(t.prices))
	for k := range t.prices {
		out = append(out, k)
	}
	return out
}

var (
	modelDateSuffix    = lazyre.New(`-(\d{8}|\d{4}-\d{2}-\d{2})$`)
	modelContextSuffix = lazyre.New(`\[[^\]]*\]$`)
)

// NormalizeModel maps a model id to its table key: lower case, without a
// "provider:" or "provider/" prefix, a "[1m]"-style suffix or a date
// snapshot suffix ("claude-sonnet-4-5-20250929" → "claude-sonnet-4-5",
// "gpt-4o-2024-08-06" → "gpt-4o").
func NormalizeModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexAny(m, ":/"); i >= 0 {
		m = m[i+1:]
	}
	m = modelContextSuffix().ReplaceAllString(m, "")
	return modelDateSuffix().ReplaceAllString(m, "")
}

// Lookup finds the price of a model: the exact id first, then its
// normalized form.
func (t PriceTable) Lookup(model string) (modelspec.Price, bool) {
	if p, ok := t.prices[model]; ok {
		return p, true
	}
	p, ok := t.prices[NormalizeModel(model)]
	return p, ok
}

// Cost is the USD cost of u on model: uncached input, output, cache reads
// and cache writes each at their own rate. A price without a cache-write
// rate bills written tokens as plain input (providers that charge nothing
// extra for writes report them inside the input). known is false (and usd
// 0) when the table has no price for the model.
func (t PriceTable) Cost(model string, u event.Usage) (usd float64, known bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	write := p.CacheWrite
	if write == 0 {
		write = p.Input
	}
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*write) / 1e6, true
}

// Cost prices u on model with the built-in table.
func Cost(model string, u event.Usage) (usd float64, known bool) {
	return DefaultPrices().Cost(model, u)
}
