package yamlsafe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// MergeBomb is the attack: each level merges two copies of the
// previous one, so decoding does 2^levels work on a kilobyte of text.
func MergeBomb(levels int) string {
	var b strings.Builder
	b.WriteString("b0: &b0 {x0: 1}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "b%d: &b%d {<<: [*b%d, *b%d], x%d: 1}\n", i, i, i-1, i-1, i)
	}
	return b.String()
}

func TestMergeBombRefused(t *testing.T) {
	var v any
	err := Unmarshal([]byte(MergeBomb(40)), &v)
	if !errors.As(err, new(BudgetError)) {
		t.Fatalf("err = %v", err)
	}
}

func TestOrdinaryYAMLDecodes(t *testing.T) {
	var v map[string]any
	if err := Unmarshal([]byte(MergeBomb(5)+"plain: [1, 2]\n"), &v); err != nil {
		t.Fatal(err)
	}
	if len(v) != 7 {
		t.Errorf("decoded %v", v)
	}
}
