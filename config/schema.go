package config

import (
	"bytes"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/schemas"
)

// compiledSchema is one compiled file schema plus its parsed document, used
// to find descriptions (hints) and known keys (suggestions).
type compiledSchema struct {
	schema *jsonschema.Schema
	doc    any
}

// compiledSchemas compiles the embedded schemas once. The schemas are
// constants of the binary, so this is a lazily built constant, not state.
var compiledSchemas = sync.OnceValues(func() (map[string]*compiledSchema, error) {
	out := map[string]*compiledSchema{}
	for kindName, s := range map[string]struct {
		url string
		doc []byte
	}{
		AgentFile:           {schemas.AgentURL, schemas.Agent()},
		DefaultRegistryFile: {schemas.StepsRegistryURL, schemas.StepsRegistry()},
	} {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.doc))
		if err != nil {
			return nil, fmt.Errorf("embedded schema %s: %w", s.url, err)
		}
		sch, err := schema.CompileSource(schema.Source{Raw: s.doc, Doc: doc, URL: s.url})
		if err != nil {
			return nil, fmt.Errorf("embedded schema %s: %w", s.url, err)
		}
		out[kindName] = &compiledSchema{schema: sch, doc: doc}
	}
	return out, nil
})

var printer = message.NewPrinter(language.English)

// schemaProblem is a problem found by JSON Schema validation.
type schemaProblem struct {
	code    string // suffix: SCHEMA-TYPE, SCHEMA-REQUIRED, SCHEMA-ENUM, SCHEMA-VALUE, UNKNOWN-KEY
	pointer string
	message string
	hint    string
	keyPos  bool // locate the member name rather than the value
}

// checkSchema validates src against the schema for kindName (AgentFile or
// DefaultRegistryFile) and returns one schemaProblem per failed keyword.
func checkSchema(kindName string, src *source) []schemaProblem {
	all, err := compiledSchemas()
	if err != nil {
		// The embedded schemas are tested; failing here is a build defect.
		return []schemaProblem{{code: "SCHEMA-VALUE", message: "internal: " + err.Error()}}
	}
	cs := all[kindName]
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(src.raw))
	if err != nil {
		return nil // Load already reported the syntax error
	}
	verr, ok := cs.schema.Validate(inst).(*jsonschema.ValidationError)
	if !ok || verr == nil {
		return nil
	}
	var out []schemaProblem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		out = append(out, cs.describe(e)...)
	}
	walk(verr)
	return out
}

// describe maps one leaf validation error to problems.
func (cs *compiledSchema) describe(e *jsonschema.ValidationError) []schemaProblem {
	ptr := JoinPointer(e.InstanceLocation...)
	node := cs.node(e.SchemaURL)
	hint := description(node)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		known := propertyNames(node)
		var out []schemaProblem
		for _, name := range k.Properties {
			p := schemaProblem{
				code:    "UNKNOWN-KEY",
				pointer: ptr + "/" + escapePointer(name),
				message: fmt.Sprintf("unknown key %q", name),
				keyPos:  true,
			}
			if s := suggest(name, known); s != "" {
				p.message += fmt.Sprintf("; did you mean %q?", s)
				p.hint = fmt.Sprintf("rename it to %q, or remove it (capstan ignores it)", s)
			} else if len(known) > 0 {
				p.hint = "remove it (capstan ignores it); known keys here: " + strings.Join(known, ", ")
			} else {
				p.hint = "remove it (capstan ignores it)"
			}
			out = append(out, p)
		}
		return out
	case *kind.Required:
		var out []schemaProblem
		for _, name := range k.Missing {
			h := description(child(node, name))
			out = append(out, schemaProblem{
				code:    "SCHEMA-REQUIRED",
				pointer: ptr + "/" + escapePointer(name),
				message: fmt.Sprintf("missing required key %q", name),
				hint:    fmt.Sprintf("add %q: %s", name, h),
			})
		}
		return out
	case *kind.Type:
		return []schemaProblem{{
			code:    "SCHEMA-TYPE",
			pointer: ptr,
			message: fmt.Sprintf("wrong type: got %s, want %s", k.Got, strings.Join(k.Want, " or ")),
			hint:    hint,
		}}
	case *kind.Enum:
		return []schemaProblem{{
			code:    "SCHEMA-ENUM",
			pointer: ptr,
			message: fmt.Sprintf("%v is not allowed: %s", display(k.Got), e.ErrorKind.LocalizedString(printer)),
			hint:    hint,
		}}
	case *kind.Minimum:
		return []schemaProblem{{
			code:    "SCHEMA-VALUE",
			pointer: ptr,
			message: fmt.Sprintf("%s is less than the minimum %s", ratString(k.Got), ratString(k.Want)),
			hint:    hint,
		}}
	default:
		return []schemaProblem{{
			code:    "SCHEMA-VALUE",
			pointer: ptr,
			message: e.ErrorKind.LocalizedString(printer),
			hint:    hint,
		}}
	}
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}

func display(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprint(v)
	}
}

// node returns the schema object a SchemaURL points at
// (".../agent.schema.json#/properties/name").
func (cs *compiledSchema) node(schemaURL string) map[string]any {
	_, frag, _ := strings.Cut(schemaURL, "#")
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	if frag == "" {
		toks = nil
	}
	var cur any = cs.doc
	for _, t := range toks {
		t, _ = url.PathUnescape(t)
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[t]
	}
	m, _ := cur.(map[string]any)
	return m
}

// child returns the schema of property name of node.
func child(node map[string]any, name string) map[string]any {
	props, _ := node["properties"].(map[string]any)
	c, _ := props[name].(map[string]any)
	return c
}

func description(node map[string]any) string {
	d, _ := node["description"].(string)
	return d
}

func propertyNames(node map[string]any) []string {
	props, _ := node["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		if k != "$schema" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// suggest returns the known key closest to name when it is close enough to
// be a plausible typo, or "".
func suggest(name string, known []string) string {
	best, bestD := "", -1
	lname := strings.ToLower(name)
	for _, k := range known {
		if strings.ToLower(k) == lname {
			return k
		}
		d := levenshtein(lname, strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	limit := max(1, min(len(name), len(best))/3)
	if bestD >= 0 && bestD <= limit {
		return best
	}
	return ""
}

// levenshtein is the optimal-string-alignment edit distance between a and
// b (runes): insertions, deletions, substitutions and adjacent
// transpositions ("modle" → "model") each cost 1.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
