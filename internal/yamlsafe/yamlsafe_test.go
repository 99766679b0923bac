package yamlsafe

import (
	"errors"
	"testing"
)

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
