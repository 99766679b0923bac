package journal

import (
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkEmit measures appending one event: a small tool call and a
// 1 MiB model reply.
func BenchmarkEmit(b *testing.B) {
	for _, size := range []int{200, 1 << 20} {
		name := "200B"
		if size > 200 {
			name = "1MiB"
		}
		b.Run(name, func(b *testing.B) {
			w, err := Create(filepath.Join(b.TempDir()), "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			data := map[string]string{"output": strings.Repeat("x", size)}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				w.Append(ToolCall, data)
			}
		})
	}
}
