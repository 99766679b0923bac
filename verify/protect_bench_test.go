package verify

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCheck measures the protected-files check of one verification on
// a work dir of 500 files (100 of them protected tests of ~2 KiB).
func BenchmarkCheck(b *testing.B) {
	dir := b.TempDir()
	body := strings.Repeat("\tif got := Add(2, 3); got != 5 { t.Fatal(got) }\n", 40)
	for i := range 100 {
		p := fmt.Sprintf("pkg%02d", i%20)
		write(b, dir, fmt.Sprintf("%s/f%d.go", p, i), "package p\n")
		write(b, dir, fmt.Sprintf("%s/g%d.go", p, i), "package p\n")
		write(b, dir, fmt.Sprintf("%s/h%d.txt", p, i), body)
		write(b, dir, fmt.Sprintf("%s/d%d.json", p, i), "{}")
		write(b, dir, fmt.Sprintf("%s/f%d_test.go", p, i), "package p\n\nfunc TestX(t *testing.T) {\n"+body+"}\n")
	}
	m, _ := NewGlobMatcher([]string{"**/*_test.go", "**/go.mod"})
	base, err := TakeFilesBaseline(dir, m)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ch, err := CheckProtected(base, dir); err != nil || len(ch) != 0 {
			b.Fatal(ch, err)
		}
	}
}
