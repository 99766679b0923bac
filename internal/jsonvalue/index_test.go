package jsonvalue

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPositionMatchesRuneCount checks line:col against a direct count on a
// text with multi-byte characters that straddle the lookup marks, with
// long and short lines.
func TestPositionMatchesRuneCount(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		b.WriteString("aé漢🙂")
		if i%700 == 0 {
			b.WriteByte('\n')
		}
	}
	raw := []byte(b.String())
	s := NewIndex(raw)
	for off := 0; off <= len(raw); off += 7 {
		line := strings.Count(string(raw[:off]), "\n") + 1
		start := strings.LastIndexByte(string(raw[:off]), '\n') + 1
		col := utf8.RuneCount(raw[start:off]) + 1
		if !utf8.RuneStart(raw[min(off, len(raw)-1)]) && off < len(raw) {
			continue // offsets always point at the start of a value
		}
		if gl, gc := s.Position(off); gl != line || gc != col {
			t.Fatalf("position(%d) = %d:%d, want %d:%d", off, gl, gc, line, col)
		}
	}
}

// FuzzSourceIndex checks the JSON pointer index against encoding/json: for
// valid JSON every indexed position starts the value it names.
func FuzzSourceIndex(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"c"}],"d~/e":null}`))
	f.Add([]byte("{\n \"x\" : \"\\u00e9\\\"\" }"))
	f.Add([]byte(`[[[]],{}]`))
	f.Add([]byte(`"\ud83d\ude00"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := NewIndex(raw)
		for off := range []int{-1, 0, len(raw), len(raw) + 5} {
			s.Position(off)
		}
		if !json.Valid(raw) {
			return
		}
		var root any
		if err := json.Unmarshal(raw, &root); err != nil {
			return
		}
		for ptr, sp := range s.spans {
			v, ok := resolvePointer(root, ptr)
			if !ok {
				t.Fatalf("index has %q, which does not resolve", ptr)
			}
			var dec any
			d := json.NewDecoder(strings.NewReader(string(raw[sp.Val:])))
			if err := d.Decode(&dec); err != nil {
				t.Fatalf("%q: no value at offset %d: %v", ptr, sp.Val, err)
			}
			a, _ := json.Marshal(v)
			b, _ := json.Marshal(dec)
			if string(a) != string(b) && len(s.dups) == 0 {
				t.Fatalf("%q: index points at %s, pointer resolves to %s", ptr, b, a)
			}
		}
	})
}

func resolvePointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i := 0
			for _, c := range tok {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// TestLocate checks member names, values, array elements and the fallback
// to the nearest existing ancestor.
func TestLocate(t *testing.T) {
	raw := []byte("{\n  \"a\": {\"b~/c\": [1, 2]},\n  \"é\": true\n}")
	x := NewIndex(raw)
	for _, c := range []struct {
		ptr       string
		key       bool
		line, col int
	}{
		{"", false, 1, 1},
		{"/a", true, 2, 3},
		{"/a", false, 2, 8},
		{"/a/b~0~1c/1", true, 2, 21},
		{"/a/missing", true, 2, 8},
		{"/é", true, 3, 3},
		{"/é", false, 3, 8},
		{"/nowhere/deep", false, 1, 1},
	} {
		if l, col := x.Locate(c.ptr, c.key); l != c.line || col != c.col {
			t.Errorf("Locate(%q, %v) = %d:%d, want %d:%d", c.ptr, c.key, l, col, c.line, c.col)
		}
	}
	if l, c := NewIndex(nil).Locate("/x", true); l != 0 || c != 0 {
		t.Errorf("empty text: %d:%d", l, c)
	}
}
