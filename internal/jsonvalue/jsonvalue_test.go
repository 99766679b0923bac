package jsonvalue

import (
	"reflect"
	"testing"
)

func TestNormalize(t *testing.T) {
	type item struct {
		Name  string `json:"name"`
		Count int    `json:"count,omitempty"`
	}
	got := Normalize(map[string]any{"items": []item{{Name: "a", Count: 2}, {Name: "b"}}, "n": 3, "s": []string{"x"}})
	want := map[string]any{"items": []any{map[string]any{"name": "a", "count": 2.0}, map[string]any{"name": "b"}}, "n": 3.0, "s": []any{"x"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	if Normalize(func() {}) != nil || Normalize("s") != "s" {
		t.Fatal("scalars or unmarshallable values")
	}
}

func TestTruthy(t *testing.T) {
	for _, v := range []any{nil, false, "", 0.0, []any{}, map[string]any{}} {
		if Truthy(v) {
			t.Errorf("%#v is true", v)
		}
	}
	for _, v := range []any{true, "x", -1.0, []any{nil}, map[string]any{"": nil}} {
		if !Truthy(v) {
			t.Errorf("%#v is false", v)
		}
	}
}
