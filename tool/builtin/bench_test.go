package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkGrep searches a tree of 200 Go-sized files (40 KB of text each)
// for a pattern found in one line of each, in content mode.
func BenchmarkGrep(b *testing.B) {
	work := b.TempDir()
	body := strings.Repeat("func helper(x int) int { return x * 2 } // filler text\n", 700)
	for i := 0; i < 200; i++ {
		p := filepath.Join(work, fmt.Sprintf("pkg%02d", i%20), fmt.Sprintf("f%03d.go", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("package p\n"+body+"// NEEDLE here\n"), 0o644)
	}
	tools, err := New(Config{WorkDir: work})
	if err != nil {
		b.Fatal(err)
	}
	grep := tools[5]
	input := []byte(`{"pattern":"NEEDLE","output_mode":"content","glob":"*.go"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := grep.Run(context.Background(), input)
		if err != nil || strings.Count(res.Content, "NEEDLE") != 200 {
			b.Fatalf("%v %.200s", err, res.Content)
		}
	}
}

// BenchmarkReadConfined measures a Read of a 2000-line file through a path
// with a link, including confinement.
func BenchmarkReadConfined(b *testing.B) {
	work := b.TempDir()
	os.MkdirAll(filepath.Join(work, "real/dir"), 0o755)
	os.WriteFile(filepath.Join(work, "real/dir/f.txt"), []byte(strings.Repeat("some line of text\n", 2000)), 0o644)
	os.Symlink("real", filepath.Join(work, "link"))
	tools, err := New(Config{WorkDir: work})
	if err != nil {
		b.Fatal(err)
	}
	input := []byte(`{"file_path":"link/dir/f.txt"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res, err := tools[0].Run(context.Background(), input); err != nil || res.IsError {
			b.Fatal(err, res.Content)
		}
	}
}
