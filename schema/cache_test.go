package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

const cacheTestSchema = `{"type": "object", "required": ["status"], "properties": {"status": {"enum": ["done", "failed"]}, "notes": {"type": "string", "maxLength": 200}}}`

func TestCacheCompilesOnce(t *testing.T) {
	c := NewCache(0)
	a, err := c.Compile(Source{Raw: []byte(cacheTestSchema)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Compile(Source{Raw: []byte(cacheTestSchema)})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same schema was compiled twice")
	}
	other, err := c.Compile(Source{Raw: []byte(`{"type": "string"}`)})
	if err != nil || other == a {
		t.Fatalf("another schema: %p %v", other, err)
	}
	// The same bytes at another URL resolve their references elsewhere.
	moved, err := c.Compile(Source{Raw: []byte(cacheTestSchema), URL: "mem://elsewhere/s.json"})
	if err != nil || moved == a {
		t.Fatalf("the same document at another URL shared an entry: %v", err)
	}
	if err := b.Check([]byte(`{"status": "done"}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Check([]byte(`{"status": "maybe"}`)); err == nil {
		t.Fatal("a cached schema accepts what it must refuse")
	}
}

func TestCacheKeepsNoFailure(t *testing.T) {
	c := NewCache(0)
	for range 2 {
		if _, err := c.Compile(Source{Raw: []byte(`{"type": "strin"}`)}); err == nil {
			t.Fatal("an invalid schema compiled")
		}
	}
	if n := c.recent.Len(); n != 0 {
		t.Fatalf("%d entries after failures", n)
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := NewCache(2)
	compile := func(i int) *Schema {
		t.Helper()
		s, err := c.Compile(Source{Raw: fmt.Appendf(nil, `{"maxLength": %d}`, i)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := compile(1)
	compile(2)
	if compile(1) != first {
		t.Fatal("a kept schema was compiled again")
	}
	compile(3) // drops 2, the least recently used
	if compile(1) != first {
		t.Fatal("the most recently used schema was dropped")
	}
	if n := len(c.entries); n != 2 || c.recent.Len() != 2 {
		t.Fatalf("%d entries (%d in order), want 2", n, c.recent.Len())
	}
	before := compile(2)
	if again := compile(2); again != before {
		t.Fatal("schema 2 not kept after compiling it again")
	}
}

// A schema file, and each file it refers to, is compiled anew when its
// content changes, and not when only its time stamp does.
func TestCacheRereadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.json", `{"type": "object", "properties": {"n": {"$ref": "num.json"}}}`)
	write("num.json", `{"type": "integer", "maximum": 10}`)
	reads := 0
	src := Source{URL: "file://" + filepath.ToSlash(filepath.Join(dir, "main.json")), Loader: func(u string) ([]byte, error) {
		reads++
		return os.ReadFile(filepath.FromSlash(u[len("file://"):]))
	}}
	c := NewCache(0)
	first, err := c.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Check([]byte(`{"n": 20}`)); err == nil {
		t.Fatal("the referenced maximum is not applied")
	}
	write("num.json", `{"type": "integer", "maximum": 10}`) // same content
	reads = 0
	same, err := c.Compile(src)
	if err != nil || same != first {
		t.Fatalf("unchanged files were compiled again: %v", err)
	}
	if reads != 2 {
		t.Fatalf("%d reads for a cached schema, want 2 (the document and its reference)", reads)
	}
	write("num.json", `{"type": "integer", "maximum": 100}`)
	changedRef, err := c.Compile(src)
	if err != nil || changedRef == first {
		t.Fatalf("a changed referenced file was not read again: %v", err)
	}
	if err := changedRef.Check([]byte(`{"n": 20}`)); err != nil {
		t.Fatalf("the new maximum is not applied: %v", err)
	}
	write("main.json", `{"type": "object", "properties": {"n": {"$ref": "num.json"}}, "required": ["n"]}`)
	changedMain, err := c.Compile(src)
	if err != nil || changedMain == changedRef {
		t.Fatalf("a changed schema file was not read again: %v", err)
	}
	if err := changedMain.Check([]byte(`{}`)); err == nil {
		t.Fatal("the new required field is not applied")
	}
	if err := os.Remove(filepath.Join(dir, "num.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile(src); err == nil {
		t.Fatal("a schema whose reference is gone still compiles from the cache")
	}
	if err := os.Remove(filepath.Join(dir, "main.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile(src); err == nil {
		t.Fatal("a schema file that is gone still compiles from the cache")
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache(4)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				s, err := c.Compile(Source{Raw: fmt.Appendf(nil, `{"maxItems": %d}`, (g+i)%6)})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.Check([]byte(`[]`)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := c.recent.Len(); n > 4 || len(c.entries) != n {
		t.Fatalf("%d entries in order, %d in the map, size 4", n, len(c.entries))
	}
}

// BenchmarkCompileOutputSchema compiles a typical structured-output schema
// (meta-schema check included), as the claude-code provider and the skill
// validation did on every call.
func BenchmarkCompileOutputSchema(b *testing.B) {
	raw := []byte(cacheTestSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CompileSource(Source{Raw: raw, URL: "mem://capstan/output.schema.json"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheCompileOutputSchema is the same schema served by a Cache.
func BenchmarkCacheCompileOutputSchema(b *testing.B) {
	raw := []byte(cacheTestSchema)
	c := NewCache(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Compile(Source{Raw: raw, URL: "mem://capstan/output.schema.json"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheCompileSchemaFile serves a schema file with one referenced
// file from a Cache: both are read and hashed on every call.
func BenchmarkCacheCompileSchemaFile(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.json"), []byte(`{"type": "object", "properties": {"n": {"$ref": "num.json"}, "s": {"type": "string"}}}`), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "num.json"), []byte(`{"type": "integer", "maximum": 10}`), 0o644); err != nil {
		b.Fatal(err)
	}
	src := Source{URL: "file://" + filepath.ToSlash(filepath.Join(dir, "main.json")), Loader: func(u string) ([]byte, error) {
		return os.ReadFile(filepath.FromSlash(u[len("file://"):]))
	}}
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			c := NewCache(0)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if cached {
					_, err = c.Compile(src)
				} else {
					_, err = CompileSource(src)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
