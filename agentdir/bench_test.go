package agentdir

import (
	"fmt"
	"testing"
)

// BenchmarkLoadAndValidate measures what `capstan run` and `capstan
// validate` pay per start on a small agent (2 steps, 2 validators).
func BenchmarkLoadAndValidate(b *testing.B) {
	dir := writeAgent(b, baseAgent(), baseRegistry(), nil)
	if _, err := LoadAndValidate(dir, testOpts); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadAndValidate(dir, testOpts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadAndValidateLarge uses a registry of 200 chained steps.
func BenchmarkLoadAndValidateLarge(b *testing.B) {
	r := chainedRegistry(200)
	dir := writeAgent(b, baseAgent(), r, nil)
	if res := Check(dir, testOpts); !res.Valid() || len(res.Warnings()) != 0 {
		b.Fatalf("fixture:\n%s", dump(res))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadAndValidate(dir, testOpts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveParams measures the per-run variable mapping.
func BenchmarkResolveParams(b *testing.B) {
	dir := writeAgent(b, baseAgent(), baseRegistry(), nil)
	ag, err := LoadAndValidate(dir, testOpts)
	if err != nil {
		b.Fatal(err)
	}
	vals := map[string]string{"topic": "benchmarks", "count": "7"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ag.ResolveParams(vals); err != nil {
			b.Fatal(err)
		}
	}
}

// chainedRegistry is the base registry with n more steps, s00000 … routed
// one to the next by their checks (no structuredGate), between
// initial.main and review.main.
func chainedRegistry(n int) map[string]any {
	r := baseRegistry()
	steps := at(r, "steps")
	for i := 0; i < n; i++ {
		next := fmt.Sprintf("s%05d", i+1)
		if i == n-1 {
			next = "review.main"
		}
		steps[fmt.Sprintf("s%05d", i)] = map[string]any{
			"c2": "initial", "c3": "main", "uvVariables": []any{"topic"},
			"check": map[string]any{"type": "keyword", "keywords": []any{"NEXT"},
				"onPass": map[string]any{"next": next}, "onFail": map[string]any{"retry": true}},
			"retry": map[string]any{"maxRetries": 2},
		}
	}
	at(steps, "initial.main", "check", "onPass")["next"] = "s00000"
	return r
}
