package llm

import (
	"encoding/json"
	"sync"
)

// SchemaCache remembers what a provider converted a tool's JSON Schema
// into, keyed by the schema's bytes: tool definitions do not change during
// a run and every turn sends them all, so each is converted once. The
// zero value is ready to use; it is safe for concurrent use.
type SchemaCache[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// Get returns the conversion of raw, calling convert the first time. A
// failed conversion is not remembered.
func (c *SchemaCache[V]) Get(raw json.RawMessage, convert func(json.RawMessage) (V, error)) (V, error) {
	c.mu.Lock()
	v, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := convert(raw)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]V{}
	}
	c.m[string(raw)] = v
	c.mu.Unlock()
	return v, nil
}
