package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
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

// BenchmarkLineCost puts the chain hash of one journal line next to the
// other costs of appending it, for a typical event line (300 B) and a
// large one (64 KiB): "hash=sha256" is the chain hash as the writer
// computes it (SHA-256, first 128 bits in hex), "hash=crc32c" a
// non-cryptographic checksum for scale (what a cheaper chain would cost),
// "write" the write(2) of the line to a file and "fstat" the identity
// check the writer makes before it.
func BenchmarkLineCost(b *testing.B) {
	for _, size := range []int{300, 64 << 10} {
		line := []byte(`{"seq":1,"type":"tool.call","data":{"output":"` + strings.Repeat("x", size-48) + `"}}`)
		name := fmt.Sprintf("%dB", size)
		b.Run(name+"/hash=sha256", func(b *testing.B) {
			var prev [32]byte
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				sum := sha256.Sum256(line)
				hex.Encode(prev[:], sum[:16])
			}
		})
		b.Run(name+"/hash=crc32c", func(b *testing.B) {
			table := crc32.MakeTable(crc32.Castagnoli)
			var sum uint32
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				sum = crc32.Checksum(line, table)
			}
			_ = sum
		})
		b.Run(name+"/write", func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), FileName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, err := f.Write(line); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/fstat", func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), FileName))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			for b.Loop() {
				if _, err := linksOf(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
