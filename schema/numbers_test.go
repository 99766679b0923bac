package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// A number far beyond any real value (which the library would take
// minutes to compare exactly) is a failure at its place, not compared; one
// inside the bound is validated as usual.
func TestOversizedNumberIsRefused(t *testing.T) {
	s, err := CompileSource(Source{Raw: []byte(`{"type": "array", "items": {"type": "number", "multipleOf": 0.7, "maximum": 3}}`)})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Check([]byte(`[1.4, 1e-999999, 1` + strings.Repeat("0", 20000) + `]`))
	problems := Problems(err)
	if len(problems) != 2 || !strings.HasPrefix(problems[0], "at /1: number 1e-999999 is too large or too precise") ||
		!strings.HasPrefix(problems[1], "at /2: number 10000000000000000000...") {
		t.Fatalf("got %q", problems)
	}
	if err := s.Check([]byte(`[1.4, 2.1e0, 7e-1]`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check([]byte(`[1e-300]`)); err == nil {
		t.Fatal("1e-300 is not a multiple of 0.7")
	}
}

// A schema holding such a number is refused when compiled.
func TestOversizedNumberInSchema(t *testing.T) {
	for _, raw := range []string{`{"multipleOf": 1e-999999}`, `{"minimum": 1E+99999999999999999999}`, `{"$schema": "http://json-schema.org/draft-07/schema#", "maximum": 1e-20000}`} {
		_, err := CompileSource(Source{Raw: []byte(raw)})
		if err == nil || !strings.Contains(err.Error(), "too large or too precise") {
			t.Errorf("%s: got %v", raw, err)
		}
	}
}

func TestOversized(t *testing.T) {
	for n, want := range map[string]bool{"1": false, "-1.5e308": false, "1e9990": false, "1e-9999": true, "1e+99999": true,
		strings.Repeat("9", maxNumberSize): false, strings.Repeat("9", maxNumberSize+1): true, "1e99999999999999999999": true} {
		if got := oversized(json.Number(n)); got != want {
			t.Errorf("oversized(%.30s) = %v, want %v", n, got, want)
		}
	}
}
