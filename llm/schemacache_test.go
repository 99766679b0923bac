package llm_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/capstan-dev/capstan/llm"
)

func TestSchemaCacheConvertsEachSchemaOnce(t *testing.T) {
	var c llm.SchemaCache[int]
	calls := 0
	convert := func(raw json.RawMessage) (int, error) {
		calls++
		if string(raw) == "bad" {
			return 0, errors.New("bad schema")
		}
		return len(raw), nil
	}
	for i := 0; i < 3; i++ {
		if v, err := c.Get(json.RawMessage(`{"type":"object"}`), convert); err != nil || v != 17 {
			t.Fatalf("%v %v", v, err)
		}
	}
	if calls != 1 {
		t.Fatalf("converted %d times", calls)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Get(json.RawMessage("bad"), convert); err == nil {
			t.Fatal("error not returned")
		}
	}
	if calls != 3 {
		t.Fatalf("a failed conversion was remembered (%d calls)", calls)
	}
}
