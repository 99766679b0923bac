// Package textdiff compares two texts line by line, for the summaries of
// changed files that the model and the journal are shown.
package textdiff

import (
	"fmt"
	"strings"
)

// Lines compares two texts line by line (longest common subsequence,
// bounded to 2000 lines each) and returns a "+N -M lines" summary and up to
// maxLines changed lines prefixed with "+" or "-".
func Lines(a, b string, maxLines int) (string, []string) {
	al, bl := splitLines(a), splitLines(b)
	if len(al) > 2000 || len(bl) > 2000 {
		return fmt.Sprintf("%d → %d lines (too long for a line diff)", len(al), len(bl)), nil
	}
	n, m := len(al), len(bl)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	add, del := 0, 0
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			add++
			if len(out) < maxLines {
				out = append(out, "+"+cut(bl[j], 200))
			}
			j++
		default:
			del++
			if len(out) < maxLines {
				out = append(out, "-"+cut(al[i], 200))
			}
			i++
		}
	}
	return fmt.Sprintf("+%d -%d lines", add, del), out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// cut shortens s to at most n bytes, not inside a UTF-8 sequence, and
// marks the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	c := n
	for c > 0 && (s[c]&0xC0) == 0x80 {
		c--
	}
	return s[:c] + "…"
}
