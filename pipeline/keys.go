package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ValueType is the JSON type a key's value must have.
type ValueType string

// Value types. TypeAny accepts any non-null JSON value.
const (
	TypeAny     ValueType = ""
	TypeArray   ValueType = "array"
	TypeObject  ValueType = "object"
	TypeString  ValueType = "string"
	TypeNumber  ValueType = "number"
	TypeBoolean ValueType = "boolean"
)

// Reducer says how writes of several stages to one key combine. Without a
// reducer a key has one writer at a time: two stages that may run
// concurrently and write the same key are a compile error.
type Reducer string

// Reducers. Contributions are combined in the pipeline's stage order (not in
// completion order), so the result is deterministic.
const (
	ReduceNone   Reducer = ""
	ReduceAppend Reducer = "append" // arrays are concatenated
	ReduceMerge  Reducer = "merge"  // objects are merged; a later stage wins on equal fields
)

// KeySpec declares a context key: its JSON type, whether an empty value
// (empty array, object or string) satisfies a contract, how concurrent
// writes combine, and an optional JSON Schema the value must match.
//
// A key that nobody declares is TypeAny, must be non-empty, and has no
// reducer: a promised key must be present and non-empty.
type KeySpec struct {
	Name        string          `json:"name" yaml:"name"`
	Type        ValueType       `json:"type,omitempty" yaml:"type"`
	AllowEmpty  bool            `json:"allow_empty,omitempty" yaml:"allow_empty"`
	Reducer     Reducer         `json:"reducer,omitempty" yaml:"reducer"`
	Schema      json.RawMessage `json:"schema,omitempty" yaml:"-"`
	Description string          `json:"description,omitempty" yaml:"description"`
}

// KeyDeclarer is implemented by agents that declare the types of the keys
// they read or write. The manager merges declarations; two different
// declarations of one key are a compile error.
type KeyDeclarer interface {
	Keys() []KeySpec
}

// Namespaces written by the runtime only.
const (
	NamespaceInput    = "input"    // the user's request and run parameters
	NamespaceMetadata = "metadata" // session_id, trace_id, created_at
	NamespaceAudit    = "audit"    // agent_runs, writes
)

// Keys written by the runtime. Stages may not declare them as
// postconditions.
const (
	KeySessionID   = "metadata.session_id"
	KeyTraceID     = "metadata.trace_id"
	KeyCreatedAt   = "metadata.created_at"
	KeyAgentRuns   = "audit.agent_runs"
	KeyWrites      = "audit.writes"
	KeyViolations  = "diagnostics.violations"
	KeyErrors      = "diagnostics.errors"
	KeyWarnings    = "diagnostics.warnings"
	KeyPerformance = "diagnostics.performance"
)

var runtimeKeys = map[string]bool{
	KeyViolations: true, KeyErrors: true, KeyWarnings: true, KeyPerformance: true,
}

// runtimeOwned reports whether key is written only by the runtime.
func runtimeOwned(key string) bool {
	ns, _, _ := strings.Cut(key, ".")
	switch ns {
	case NamespaceInput, NamespaceMetadata, NamespaceAudit:
		return true
	}
	return runtimeKeys[key]
}

// maxKeyLen bounds key names; keys appear in prompts, audit and errors.
const maxKeyLen = 200

// CheckKey reports whether name is a valid key: "namespace.key", at least
// two dot-separated segments, each starting with a letter or underscore and
// made of letters, digits, '_' and '-'.
func CheckKey(name string) error {
	if name == "" {
		return fmt.Errorf("empty key")
	}
	if len(name) > maxKeyLen {
		return fmt.Errorf("key %.40q... is longer than %d bytes", name, maxKeyLen)
	}
	segs := strings.Split(name, ".")
	if len(segs) < 2 {
		return fmt.Errorf("key %q has no namespace (want namespace.key, e.g. reasoning.intents)", name)
	}
	if segs[0] == "version" {
		return fmt.Errorf("key %q: namespace \"version\" is reserved", name)
	}
	for _, s := range segs {
		if s == "" {
			return fmt.Errorf("key %q has an empty segment", name)
		}
		for i, r := range s {
			ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') ||
				(i > 0 && (r == '-' || (r >= '0' && r <= '9')))
			if !ok {
				return fmt.Errorf("key %q: segment %q must start with a letter or '_' and contain only letters, digits, '_' and '-'", name, s)
			}
		}
	}
	return nil
}

// Namespace returns the namespace of key (the part before the first dot).
func Namespace(key string) string {
	ns, _, _ := strings.Cut(key, ".")
	return ns
}

// localName returns key without its namespace.
func localName(key string) string {
	_, rest, _ := strings.Cut(key, ".")
	return rest
}

func (t ValueType) valid() bool {
	switch t {
	case TypeAny, TypeArray, TypeObject, TypeString, TypeNumber, TypeBoolean:
		return true
	}
	return false
}

func (r Reducer) valid() bool {
	switch r {
	case ReduceNone, ReduceAppend, ReduceMerge:
		return true
	}
	return false
}

// sameSpec reports whether two declarations of one key agree.
func sameSpec(a, b KeySpec) bool {
	return a.Name == b.Name && a.Type == b.Type && a.AllowEmpty == b.AllowEmpty &&
		a.Reducer == b.Reducer && string(a.Schema) == string(b.Schema)
}
