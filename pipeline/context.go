package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// ContextVersion is the version of the AgentContext JSON layout.
const ContextVersion = "1"

// entry is one stored value: compact JSON plus its classification. Entries
// are immutable once stored and shared between snapshots.
type entry struct {
	raw   json.RawMessage
	kind  ValueType // TypeAny stands for JSON null here
	null  bool
	empty bool
}

func (e *entry) hash() string {
	s := sha256.Sum256(e.raw)
	return hex.EncodeToString(s[:])
}

// MaxValueSize bounds the JSON size of one value.
const MaxValueSize = 16 << 20

// newEntry marshals v (any JSON-compatible value, or json.RawMessage) into
// an entry.
func newEntry(v any) (*entry, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		return nil, fmt.Errorf("[]byte is not a JSON value; use json.RawMessage or string")
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("value is not JSON-compatible: %w", err)
		}
		raw = b
	}
	if len(raw) > MaxValueSize {
		return nil, fmt.Errorf("value is %d bytes of JSON, more than the %d allowed", len(raw), MaxValueSize)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("value is not valid JSON: %w", err)
	}
	e := &entry{raw: buf.Bytes()}
	switch c := e.raw[0]; c {
	case 'n':
		e.null = true
	case '[':
		e.kind, e.empty = TypeArray, string(e.raw) == "[]"
	case '{':
		e.kind, e.empty = TypeObject, string(e.raw) == "{}"
	case '"':
		e.kind, e.empty = TypeString, string(e.raw) == `""`
	case 't', 'f':
		e.kind = TypeBoolean
	default:
		e.kind = TypeNumber
	}
	return e, nil
}

// board is an immutable map of keys to entries. A board is never modified
// after it has been handed to a stage; merges build a new one.
type board map[string]*entry

// scope restricts an AgentContext to one stage: what it may read, what it
// may write, and what it tried to do outside that.
type scope struct {
	agentID    string
	writable   map[string]bool
	readable   map[string]bool
	rejected   []event.PipelineViolation
	undeclared map[string]bool
	usage      event.Usage
}

// AgentContext is the shared context of a reasoning pipeline:
// values under "namespace.key" names, stored as JSON.
//
// A stage receives its own AgentContext: an immutable snapshot of the keys
// it declared (its preconditions, optional reads, and the input and
// metadata namespaces) plus a writer that accepts only its postconditions.
// Writes to other keys fail with a namespace violation and are recorded;
// the runtime also checks what the returned context contains, so a stage
// cannot bypass the writer. Values are copied in and out as JSON, so no
// stage can change what another stage reads.
//
// An AgentContext made with NewAgentContext is unscoped: it accepts writes
// to any key except the runtime's own (audit.*, metadata.*, and the
// diagnostics keys the runtime fills); use it to build the input of
// Manager.Execute or to unit-test an agent.
type AgentContext struct {
	mu    sync.Mutex
	base  board
	delta map[string]*entry
	sc    *scope
}

// NewAgentContext returns an empty unscoped context with the session and
// trace ids set in the metadata namespace (empty ids are left out).
func NewAgentContext(sessionID, traceID string) *AgentContext {
	c := &AgentContext{base: board{}, delta: map[string]*entry{}}
	if sessionID != "" {
		c.base[KeySessionID] = mustEntry(sessionID)
	}
	if traceID != "" {
		c.base[KeyTraceID] = mustEntry(traceID)
	}
	return c
}

func mustEntry(v any) *entry {
	e, err := newEntry(v)
	if err != nil {
		panic("pipeline: " + err.Error())
	}
	return e
}

// SetInput stores v as input.<name>, the namespace only the runtime (and the
// caller building the pipeline's input) writes. It fails on a stage's
// context.
func (c *AgentContext) SetInput(name string, v any) error {
	c.mu.Lock()
	scoped := c.sc != nil
	c.mu.Unlock()
	if scoped {
		return c.Set(NamespaceInput+"."+name, v)
	}
	key := NamespaceInput + "." + name
	if err := CheckKey(key); err != nil {
		return agenterr.Wrap(err, agenterr.CodeContextValue, agenterr.LayerPipeline, false, "bad input name")
	}
	e, err := newEntry(v)
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeContextValue, agenterr.LayerPipeline, false, "input %s", key)
	}
	c.mu.Lock()
	if c.delta == nil {
		c.delta = map[string]*entry{}
	}
	c.delta[key] = e
	c.mu.Unlock()
	return nil
}

// Set stores v (a JSON-compatible value or a json.RawMessage) under key.
//
// On a stage's context a key that is not among the stage's postconditions
// is a namespace violation: the value is not stored, the attempt is
// recorded, and the error (code NAMESPACE_VIOLATION) says which agent and
// key. On an unscoped context the runtime's own keys are refused.
func (c *AgentContext) Set(key string, v any) error {
	if err := CheckKey(key); err != nil {
		return agenterr.Wrap(err, agenterr.CodeNamespaceViolation, agenterr.LayerPipeline, false, "bad key")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sc != nil && !c.sc.writable[key] {
		v := event.PipelineViolation{AgentID: c.sc.agentID, Kind: event.ViolationNamespace, Key: key,
			Message: namespaceMessage(key)}
		c.sc.rejected = append(c.sc.rejected, v)
		return violationError(v)
	}
	if c.sc == nil && runtimeOwned(key) && Namespace(key) != NamespaceInput {
		return agenterr.New(agenterr.CodeNamespaceViolation, agenterr.LayerPipeline, false,
			"namespace violation: %s is written only by the pipeline runtime", key)
	}
	e, err := newEntry(v)
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeContextValue, agenterr.LayerPipeline, false, "set %s", key)
	}
	if c.delta == nil { // the zero AgentContext is an empty unscoped context
		c.delta = map[string]*entry{}
	}
	c.delta[key] = e
	return nil
}

// lookup returns the entry visible under key, recording reads of keys the
// stage did not declare.
func (c *AgentContext) lookup(key string) (*entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.delta[key]; ok {
		return e, true
	}
	e, ok := c.base[key]
	if !ok && c.sc != nil && !c.sc.readable[key] && !c.sc.writable[key] {
		if c.sc.undeclared == nil {
			c.sc.undeclared = map[string]bool{}
		}
		c.sc.undeclared[key] = true
	}
	return e, ok
}

// Has reports whether key holds a value (null counts as a value).
func (c *AgentContext) Has(key string) bool {
	_, ok := c.lookup(key)
	return ok
}

// Get returns a fresh decoded copy of key's value (numbers as float64,
// objects as map[string]any, arrays as []any).
func (c *AgentContext) Get(key string) (any, bool) {
	e, ok := c.lookup(key)
	if !ok {
		return nil, false
	}
	var v any
	if err := json.Unmarshal(e.raw, &v); err != nil {
		return nil, false
	}
	return v, true
}

// Raw returns a copy of key's JSON value.
func (c *AgentContext) Raw(key string) (json.RawMessage, bool) {
	e, ok := c.lookup(key)
	if !ok {
		return nil, false
	}
	return append(json.RawMessage(nil), e.raw...), true
}

// Decode unmarshals key's value into dst. A missing key is an error whose
// message is "<key> not found".
func (c *AgentContext) Decode(key string, dst any) error {
	e, ok := c.lookup(key)
	if !ok {
		return fmt.Errorf("%s not found", key)
	}
	if err := json.Unmarshal(e.raw, dst); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// String returns key's value when it is a JSON string, else "".
func (c *AgentContext) String(key string) string {
	var s string
	if e, ok := c.lookup(key); ok && e.kind == TypeString {
		_ = json.Unmarshal(e.raw, &s)
	}
	return s
}

// Keys lists the keys visible in this context, sorted.
func (c *AgentContext) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool, len(c.base)+len(c.delta))
	for k := range c.base {
		seen[k] = true
	}
	for k := range c.delta {
		seen[k] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// AgentID returns the id of the stage this context belongs to, or "" for
// an unscoped context.
func (c *AgentContext) AgentID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sc == nil {
		return ""
	}
	return c.sc.agentID
}

// AddUsage records model tokens a stage spent; the runtime adds them to the
// stage's audit record.
func (c *AgentContext) AddUsage(u event.Usage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sc != nil {
		c.sc.usage.Add(u)
	}
}

// flatten returns every visible entry as one board.
func (c *AgentContext) flatten() board {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := make(board, len(c.base)+len(c.delta))
	for k, e := range c.base {
		b[k] = e
	}
	for k, e := range c.delta {
		b[k] = e
	}
	return b
}

// MarshalJSON renders the context as one object per namespace:
// {"version":"1","input":{...},"reasoning":{"intents":[...]},...}. Keys
// inside a namespace are the key names without the namespace.
func (c *AgentContext) MarshalJSON() ([]byte, error) {
	flat := c.flatten()
	out := map[string]any{"version": ContextVersion}
	nss := map[string]map[string]json.RawMessage{}
	for k, e := range flat {
		ns := Namespace(k)
		if nss[ns] == nil {
			nss[ns] = map[string]json.RawMessage{}
		}
		nss[ns][localName(k)] = e.raw
	}
	for ns, m := range nss {
		if ns == "version" {
			continue
		}
		out[ns] = m
	}
	return json.Marshal(out)
}

// namespaceMessage words a namespace violation as climpt does; the
// violation's AgentID (and the error's "agent <id>:" prefix) name the agent.
func namespaceMessage(key string) string {
	return "namespace violation: agent wrote to unauthorized key " + key
}
