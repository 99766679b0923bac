package agentdir

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/schemas"
)

// The configuration schemas are checked by the schema package's subset
// validator (compiledSchemas); the tests here hold it to the library's
// verdict on the same schemas (compiled from the full documents, which
// the library always does), failure by failure: on every agent.json and
// steps_registry.json a config test writes (writeAgent calls
// sameFailures), on the examples mutated at every location, and under
// FuzzEngines.

// librarySchemas are the embedded schemas compiled by the library.
var librarySchemas = map[string]func() (*schema.Schema, error){
	AgentFile: sync.OnceValues(func() (*schema.Schema, error) {
		return schema.CompileSource(schema.Source{Raw: schemas.Agent(), URL: schemas.AgentURL, Builtin: true})
	}),
	DefaultRegistryFile: sync.OnceValues(func() (*schema.Schema, error) {
		return schema.CompileSource(schema.Source{Raw: schemas.StepsRegistry(), URL: schemas.StepsRegistryURL, Builtin: true})
	}),
}

// sameFailures fails t when the subset validator and the library report
// different failures for raw checked against the schema of kind
// (AgentFile or DefaultRegistryFile). raw that is not JSON is skipped.
func sameFailures(t testing.TB, kind string, raw []byte) {
	t.Helper()
	inst, err := schema.Decode(raw)
	if err != nil {
		return
	}
	sameFailuresOf(t, kind, inst, string(raw))
}

func sameFailuresOf(t testing.TB, kind string, inst any, what string) {
	t.Helper()
	sub, err := compiledSchemas[kind]()
	if err != nil {
		t.Fatal(err)
	}
	lib, err := librarySchemas[kind]()
	if err != nil {
		t.Fatal(err)
	}
	got, want := sub.Failures(inst), lib.Failures(inst)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the subset validator and the library disagree on\n%.3000s\nsubset:\n%s\nlibrary:\n%s", kind, what, showFailures(got), showFailures(want))
	}
}

func showFailures(fails []schema.Failure) string {
	var b strings.Builder
	for _, f := range fails {
		node := "nil"
		if f.Node != nil {
			node = fmt.Sprintf("%d keys", len(f.Node))
		}
		fmt.Fprintf(&b, "  %s %q at %q (schema %s, node %s) value %#v names %q params %#v\n", f.Keyword, f.Message, f.Pointer(), f.SchemaPath, node, f.Value, f.Names, f.Params)
	}
	return b.String()
}

// exampleFiles returns the agent.json and steps_registry.json files of the
// examples, by kind, with the base fixtures of the config tests.
func exampleFiles(t testing.TB) map[string][][]byte {
	t.Helper()
	out := map[string][][]byte{}
	for kind, name := range map[string]string{AgentFile: "agent.json", DefaultRegistryFile: "steps_registry.json"} {
		paths, err := filepath.Glob(filepath.Join("..", "examples", "*", name))
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) == 0 {
			t.Fatalf("no examples/*/%s", name)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[kind] = append(out[kind], b)
		}
	}
	a, _ := json.Marshal(baseAgent())
	r, _ := json.Marshal(baseRegistry())
	out[AgentFile] = append(out[AgentFile], a)
	out[DefaultRegistryFile] = append(out[DefaultRegistryFile], r)
	// The other branch of each anyOf: a verdict instead of a completion,
	// an entry step mapping instead of an entry step.
	verdict := baseAgent()
	runner := at(verdict, "runner")
	delete(runner, "completion")
	runner["verdict"] = map[string]any{"type": "keyword", "keyword": "DONE"}
	mapping := baseRegistry()
	delete(mapping, "entryStep")
	mapping["entryStepMapping"] = map[string]any{"default": "initial.main"}
	a, _ = json.Marshal(verdict)
	r, _ = json.Marshal(mapping)
	out[AgentFile] = append(out[AgentFile], a)
	out[DefaultRegistryFile] = append(out[DefaultRegistryFile], r)
	// A file that holds every property each schema declares.
	for kind, doc := range map[string][]byte{AgentFile: schemas.Agent(), DefaultRegistryFile: schemas.StepsRegistry()} {
		root, err := schema.Decode(doc)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(everyProperty(root, root, 0))
		if err != nil {
			t.Fatal(err)
		}
		out[kind] = append(out[kind], b)
	}
	return out
}

// everyProperty returns a value for the schema object sch of the
// document root that holds every property it declares (recursively, a
// reference followed up to a depth), an item for each array and, for a
// scalar, its enum's first value or a value of its type.
func everyProperty(root, sch any, depth int) any {
	m, _ := sch.(map[string]any)
	if ref, ok := m["$ref"].(string); ok && depth < 5 {
		var target any = root
		for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			target = childAt(target, tok)
		}
		return everyProperty(root, target, depth+1)
	}
	if e, ok := m["enum"].([]any); ok {
		return e[0]
	}
	typ, _ := m["type"].(string)
	if list, ok := m["type"].([]any); ok {
		typ, _ = list[0].(string)
	}
	props, _ := m["properties"].(map[string]any)
	switch {
	case props != nil || typ == "object":
		obj := map[string]any{}
		if depth < 5 {
			for name, p := range props {
				obj[name] = everyProperty(root, p, depth+1)
			}
		}
		return obj
	case typ == "array":
		if depth < 5 {
			return []any{everyProperty(root, m["items"], depth+1)}
		}
		return []any{}
	case typ == "integer", typ == "number":
		if v, ok := m["minimum"]; ok {
			return v
		}
		return json.Number("1")
	case typ == "boolean":
		return true
	}
	return "x"
}

// replacements are the values a mutation puts in place of another: every
// JSON type, the numbers around the schemas' bounds, strings that match
// and miss their patterns, and (added by palette) every enum value and
// property name the schemas hold.
var replacements = []any{
	nil, true, false, json.Number("0"), json.Number("-1"), json.Number("1"), json.Number("2.0"),
	json.Number("0.5"), json.Number("1e2"), json.Number("-0.25"), json.Number("100000000000000000000000"),
	json.Number("1e400"), json.Number("3"), json.Number("65536"), json.Number("2147483648"),
	"", "x", "ünïcödé", strings.Repeat("long", 80), "1.0.0", "1.0", "a-b", "A_1*", "B=c", "Bash(git log:*)",
	"script:script.yaml", "../up", "/abs",
	[]any{}, []any{"a", json.Number("1")}, []any{map[string]any{}},
	map[string]any{}, map[string]any{"x": json.Number("1")},
}

// schemaWords are the enum values and the property names the two schemas
// hold, each once.
var schemaWords = sync.OnceValues(func() (enums, names []string) {
	enums, names, _ = schemaValues()
	return enums, names
})

// boundaryValues are, for every bound of the two schemas, the values at
// it and just past it: numbers at and around each minimum and maximum,
// strings as long as each minLength and maxLength and one rune past it.
var boundaryValues = sync.OnceValue(func() []any {
	_, _, bounds := schemaValues()
	return bounds
})

func schemaValues() (enums, names []string, bounds []any) {
	seen := map[string]bool{}
	addBound := func(kw string, v any) {
		n, ok := v.(json.Number)
		if !ok || seen[kw+string(n)] {
			return
		}
		seen[kw+string(n)] = true
		i, err := strconv.Atoi(string(n))
		switch kw {
		case "minLength", "maxLength":
			if err == nil {
				for _, l := range []int{i - 1, i, i + 1} {
					if l >= 0 {
						bounds = append(bounds, strings.Repeat("é", l))
					}
				}
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			bounds = append(bounds, n)
			if err == nil {
				bounds = append(bounds, json.Number(strconv.Itoa(i-1)), json.Number(strconv.Itoa(i+1)))
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				addBound(k, x[k])
				if e, ok := x[k].([]any); ok && k == "enum" {
					for _, s := range e {
						if s, ok := s.(string); ok && !seen[s] {
							seen[s] = true
							enums = append(enums, s)
						}
					}
				}
				if props, ok := x[k].(map[string]any); ok && k == "properties" {
					for _, name := range slices.Sorted(maps.Keys(props)) {
						if !seen[name] {
							seen[name] = true
							names = append(names, name)
						}
					}
				}
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, doc := range [][]byte{schemas.Agent(), schemas.StepsRegistry()} {
		v, _ := schema.Decode(doc)
		walk(v)
	}
	return enums, names, bounds
}

// palette is replacements, the schemas' enum values and property names.
var palette = sync.OnceValue(func() []any {
	out := append(slices.Clone(replacements), boundaryValues()...)
	enums, names := schemaWords()
	for _, s := range append(enums, names...) {
		out = append(out, s)
	}
	return out
})

// locations lists the pointers of every value in v (reference tokens),
// the document itself first, in a fixed order.
func locations(v any, at []string, out [][]string) [][]string {
	out = append(out, at)
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			out = locations(x[k], append(slices.Clip(at), k), out)
		}
	case []any:
		for i, e := range x {
			out = locations(e, append(slices.Clip(at), strconv.Itoa(i)), out)
		}
	}
	return out
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// mutate applies mutation op (with value val from the palette) at the
// location at of doc and returns the result (doc itself may change).
// Operations: 0 replace the value, 1 remove it (from its object or
// array), 2 add a member named by val (a string) or an element val to the
// container, 3 rename the member to val, 4 duplicate an element.
func mutate(doc any, at []string, op int, val any) any {
	if len(at) == 0 {
		if op == 0 {
			return deepCopy(val)
		}
		return mutateIn(doc, op, val)
	}
	parent := doc
	for _, tok := range at[:len(at)-1] {
		parent = childAt(parent, tok)
	}
	last := at[len(at)-1]
	switch p := parent.(type) {
	case map[string]any:
		switch op {
		case 0:
			p[last] = deepCopy(val)
		case 1:
			delete(p, last)
		case 3:
			if name, ok := val.(string); ok {
				p[name] = p[last]
				delete(p, last)
			}
		default:
			p[last] = mutateIn(p[last], op, val)
		}
	case []any:
		i, _ := strconv.Atoi(last)
		switch op {
		case 0:
			p[i] = deepCopy(val)
		case 1:
			// Removing shifts the rest: write a copy back through the
			// grandparent.
			return setAt(doc, at[:len(at)-1], append(slices.Clone(p[:i]), p[i+1:]...))
		case 4:
			return setAt(doc, at[:len(at)-1], slices.Insert(slices.Clone(p), i, deepCopy(p[i])))
		default:
			p[i] = mutateIn(p[i], op, val)
		}
	}
	return doc
}

// mutateIn adds to the container v (op 2): a member named val, or the
// element val.
func mutateIn(v any, op int, val any) any {
	if op != 2 {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		if name, ok := val.(string); ok {
			x[name] = json.Number("1")
		} else {
			x["unknownKey"] = deepCopy(val)
		}
	case []any:
		return append(x, deepCopy(val))
	}
	return v
}

func childAt(v any, tok string) any {
	switch x := v.(type) {
	case map[string]any:
		return x[tok]
	case []any:
		i, _ := strconv.Atoi(tok)
		return x[i]
	}
	return nil
}

func setAt(doc any, at []string, val any) any {
	if len(at) == 0 {
		return val
	}
	parent := doc
	for _, tok := range at[:len(at)-1] {
		parent = childAt(parent, tok)
	}
	switch p := parent.(type) {
	case map[string]any:
		p[at[len(at)-1]] = val
	case []any:
		i, _ := strconv.Atoi(at[len(at)-1])
		p[i] = val
	}
	return doc
}

// Every location of every example's files (and the base fixtures):
// replaced by each replacement value (and, where a string is, by each
// enum value of the schemas), removed, duplicated (in an array), grown by
// each property name of the schemas (an object) and renamed: both engines
// report the same failures. With -short, every tenth location; under the
// race detector, every fourth.
func TestEnginesAgreeOnMutatedExamples(t *testing.T) {
	enums, names := schemaWords()
	n := 0
	for kind, files := range exampleFiles(t) {
		for _, raw := range files {
			orig, err := schema.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			sameFailuresOf(t, kind, orig, string(raw))
			for i, at := range locations(orig, nil, nil) {
				if testing.Short() && i%10 != 0 || i%mutationStride != 0 {
					continue
				}
				type edit struct {
					op  int
					val any
				}
				var edits []edit
				for _, v := range replacements {
					edits = append(edits, edit{0, v})
				}
				switch mutateTarget(orig, at).(type) {
				case string, json.Number:
					for _, v := range boundaryValues() {
						edits = append(edits, edit{0, v})
					}
				}
				switch mutateTarget(orig, at).(type) {
				case string:
					for _, v := range enums {
						edits = append(edits, edit{0, v})
					}
				case map[string]any:
					for _, v := range append([]string{"unknownKey"}, names...) {
						edits = append(edits, edit{2, v})
					}
				case []any:
					edits = append(edits, edit{2, "x"}, edit{2, json.Number("1")})
				}
				if len(at) > 0 {
					edits = append(edits, edit{1, nil}, edit{4, nil}, edit{3, "unknownKey"}, edit{3, names[i%len(names)]})
				}
				for _, e := range edits {
					doc := mutate(deepCopy(orig), at, e.op, e.val)
					sameFailuresOf(t, kind, doc, fmt.Sprintf("%s with op %d (%v) at /%s", kind, e.op, e.val, strings.Join(at, "/")))
					n++
				}
				if t.Failed() {
					return
				}
			}
		}
	}
	t.Logf("%d mutated documents, each checked by both engines", n)
}

// mutateTarget returns the value at the location at of doc.
func mutateTarget(doc any, at []string) any {
	for _, tok := range at {
		doc = childAt(doc, tok)
	}
	return doc
}

// FuzzEngines mutates the examples' files and the base fixtures (doc) by
// a list of operations (ops: triples of location, operation and palette
// index) and holds the subset validator to the library's failures.
func FuzzEngines(f *testing.F) {
	for _, files := range exampleFiles(f) {
		for i, raw := range files {
			f.Add(raw, []byte{byte(i), 0, 3})
			f.Add(raw, []byte{7, 2, 40, 11, 0, 9, 3, 3, 60})
		}
	}
	palette := palette()
	f.Fuzz(func(t *testing.T, raw, ops []byte) {
		if len(raw) > 1<<16 {
			return
		}
		doc, err := schema.Decode(raw)
		if err != nil {
			return
		}
		for i := 0; i+2 < len(ops) && i < 3*16; i += 3 {
			locs := locations(doc, nil, nil)
			if len(locs) > 5000 {
				break // duplicating grows a document exponentially
			}
			at := locs[int(ops[i])%len(locs)]
			doc = mutate(doc, at, int(ops[i+1])%5, palette[int(ops[i+2])%len(palette)])
		}
		sameFailuresOf(t, AgentFile, doc, string(raw))
		sameFailuresOf(t, DefaultRegistryFile, doc, string(raw))
	})
}
