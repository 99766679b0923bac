package agentdir

import (
	"encoding/json"
	"fmt"
	"testing"
)

// minifiedRegistry is a one-line steps_registry.json with n chained steps,
// each with an unknown key, so validation reports one warning per step
// with its line and column.
func minifiedRegistry(tb testing.TB, n int) string {
	tb.Helper()
	r := baseRegistry()
	steps := at(r, "steps")
	for i := 0; i < n; i++ {
		next := fmt.Sprintf("s%05d", i+1)
		if i == n-1 {
			next = "review.main"
		}
		steps[fmt.Sprintf("s%05d", i)] = map[string]any{
			"c2": "initial", "c3": "main", "uvVariables": []any{"topic"}, "notes": "unknown key",
			"check": map[string]any{"type": "keyword", "keywords": []any{"NEXT"},
				"onPass": map[string]any{"next": next}, "onFail": map[string]any{"retry": true}},
		}
	}
	at(steps, "initial.main", "check", "onPass")["next"] = "s00000"
	b, err := json.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	return writeAgent(tb, baseAgent(), b, nil)
}

// BenchmarkCheckMinifiedRegistry validates a minified registry of 20,000
// steps with one warning each (line:col lookups on a single long line).
func BenchmarkCheckMinifiedRegistry(b *testing.B) {
	dir := minifiedRegistry(b, 20000)
	res := Check(dir, testOpts)
	if !res.Valid() || len(res.Warnings()) < 20000 {
		b.Fatalf("fixture: valid=%v warnings=%d", res.Valid(), len(res.Warnings()))
	}
	b.ReportAllocs()
	for b.Loop() {
		Check(dir, testOpts)
	}
}
