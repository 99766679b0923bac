package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPositionMatchesRuneCount checks line:col against a direct count on a
// text with multi-byte characters that straddle the lookup marks, with
// long and short lines.
func TestPositionMatchesRuneCount(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		b.WriteString("aé漢🙂")
		if i%700 == 0 {
			b.WriteByte('\n')
		}
	}
	raw := []byte(b.String())
	s := newSource("x.json", raw)
	for off := 0; off <= len(raw); off += 7 {
		line := strings.Count(string(raw[:off]), "\n") + 1
		start := strings.LastIndexByte(string(raw[:off]), '\n') + 1
		col := utf8.RuneCount(raw[start:off]) + 1
		if !utf8.RuneStart(raw[min(off, len(raw)-1)]) && off < len(raw) {
			continue // offsets always point at the start of a value
		}
		if gl, gc := s.position(off); gl != line || gc != col {
			t.Fatalf("position(%d) = %d:%d, want %d:%d", off, gl, gc, line, col)
		}
	}
}

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
