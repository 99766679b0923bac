package claudecode

import (
	"encoding/json"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/schema"
)

// BenchmarkStructured checks a structured answer against the query's
// output schema: "compile each call" is what every query did before the
// bridge kept its compiled schemas (a new cache per call), "cached" is a
// later query with the same schema.
func BenchmarkStructured(b *testing.B) {
	outputSchema := json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","enum":["completed","failed"]},"count":{"type":"integer"}},"required":["status"],"additionalProperties":false}`)
	answer := json.RawMessage(`{"status":"completed","count":3}`)
	for _, tc := range []struct {
		name   string
		cached bool
	}{{"compile each call", false}, {"cached", true}} {
		b.Run(tc.name, func(b *testing.B) {
			br := &Bridge{schemas: schema.NewCache(0)}
			b.ReportAllocs()
			for b.Loop() {
				if !tc.cached {
					br.schemas = schema.NewCache(0)
				}
				st := &state{res: &event.QueryResult{StructuredOutput: answer}}
				if err := br.structured(st, outputSchema); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
