package schema

import (
	"testing"
)

// BenchmarkResolveCached measures a resolution served from the cache (a
// step's schema is resolved every iteration).
func BenchmarkResolveCached(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, dir, "common.schema.json", commonSchema)
	writeFile(b, dir, "issue.schema.json", issueSchema)
	r := NewResolver(dir)
	if _, err := r.Resolve("issue.schema.json", "initial.issue"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Resolve("issue.schema.json", "initial.issue"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveUncached measures a first resolution: two files read and
// parsed, refs inlined, allOf merged.
func BenchmarkResolveUncached(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, dir, "common.schema.json", commonSchema)
	writeFile(b, dir, "issue.schema.json", issueSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewResolver(dir).Resolve("issue.schema.json", "initial.issue"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate measures validating a structured output.
func BenchmarkValidate(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, dir, "common.schema.json", commonSchema)
	writeFile(b, dir, "issue.schema.json", issueSchema)
	raw, err := NewResolver(dir).Resolve("issue.schema.json", "initial.issue")
	if err != nil {
		b.Fatal(err)
	}
	v, err := Compile(raw)
	if err != nil {
		b.Fatal(err)
	}
	out := []byte(`{"stepId":"initial.issue","status":"completed","next_action":{"action":"closing"},"issue":{"number":3,"labels":[{"name":"bug"}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Validate(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtractJSON measures recovering JSON from a prose answer.
func BenchmarkExtractJSON(b *testing.B) {
	text := "I have finished the work. Here is the summary:\n\n```json\n{\"stepId\":\"initial.issue\",\"status\":\"completed\",\"next_action\":{\"action\":\"closing\"}}\n```\n\nLet me know if anything else is needed."
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ExtractJSON(text); !ok {
			b.Fatal("not found")
		}
	}
}
