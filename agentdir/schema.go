package agentdir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/schemas"
)

//go:generate go test -run ^TestTablesFileCurrent$ -update .

// compiledSchemas returns each embedded schema ready to check a
// configuration file of its kind (AgentFile or DefaultRegistryFile). They
// are checked by the schema package's subset validator, from the tables
// go generate writes (schema_tables.go; TestTablesCurrent fails when they
// are stale), so nothing is compiled when capstan starts; the full
// documents are decoded only to word failures (their descriptions become
// hints). The schemas are constants of the binary, so these are lazily
// built constants, not state. They are not checked against their
// meta-schema here: TestEmbeddedSchemas does that.
var compiledSchemas = map[string]func() (*schema.Schema, error){
	AgentFile:           compileEmbedded(schemas.AgentURL, schemas.Agent, agentTable),
	DefaultRegistryFile: compileEmbedded(schemas.StepsRegistryURL, schemas.StepsRegistry, registryTable),
}

func compileEmbedded(url string, doc func() []byte, table *schema.SubsetTable) func() (*schema.Schema, error) {
	return sync.OnceValues(func() (*schema.Schema, error) {
		sch, err := schema.CompileSource(schema.Source{Raw: doc(), URL: url, Builtin: true, Subset: table})
		if err != nil {
			return nil, fmt.Errorf("embedded schema %s: %w", url, err)
		}
		return sch, nil
	})
}

// schemaProblem is a problem found by JSON Schema validation.
type schemaProblem struct {
	code    string // suffix: SCHEMA-TYPE, SCHEMA-REQUIRED, SCHEMA-ENUM, SCHEMA-VALUE, UNKNOWN-KEY
	pointer string
	message string
	hint    string
	keyPos  bool   // locate the member name rather than the value
	allowed string // an enum's allowed values, listed ("a", "b")
}

// checkSchema validates src against the schema for kindName (AgentFile or
// DefaultRegistryFile) and returns one schemaProblem per failed keyword.
func checkSchema(kindName string, src *source) []schemaProblem {
	sch, err := compiledSchemas[kindName]()
	if err != nil {
		// The embedded schemas are tested; failing here is a build defect.
		return []schemaProblem{{code: "SCHEMA-VALUE", message: "internal: " + err.Error()}}
	}
	inst, err := schema.Decode(src.raw)
	if err != nil {
		return nil // Load already reported the syntax error
	}
	var out []schemaProblem
	for _, f := range sch.Failures(inst) {
		out = append(out, describe(f)...)
	}
	return oncePerValue(out)
}

// oncePerValue keeps one problem for a value of the wrong type: its
// SCHEMA-TYPE, whose hint takes the allowed values of an enum that failed
// there too (7 where "retry", "abort" or "skip" is wanted is one mistake,
// not two).
func oncePerValue(problems []schemaProblem) []schemaProblem {
	wrongType := map[string]*schemaProblem{}
	for i := range problems {
		if problems[i].code == "SCHEMA-TYPE" {
			wrongType[problems[i].pointer] = &problems[i]
		}
	}
	for _, p := range problems {
		if t := wrongType[p.pointer]; t != nil && p.code == "SCHEMA-ENUM" && p.allowed != "" {
			t.hint = "write one of " + p.allowed + withDesc(p.hint)
		}
	}
	out := problems[:0:0]
	for _, p := range problems {
		switch p.code {
		case "SCHEMA-TYPE", "UNKNOWN-KEY", "SCHEMA-REQUIRED":
		default:
			if wrongType[p.pointer] != nil {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// withDesc is "; desc" for a field's description, "" when it has none.
func withDesc(desc string) string {
	if desc == "" {
		return ""
	}
	return "; " + strings.TrimSuffix(desc, ".")
}

// describe maps one failing keyword to problems.
func describe(f schema.Failure) []schemaProblem {
	ptr := f.Pointer()
	node := f.Node
	hint := description(node)
	switch f.Keyword {
	case "additionalProperties", "unevaluatedProperties":
		if len(f.Names) == 0 {
			break
		}
		known := propertyNames(node)
		var out []schemaProblem
		for _, name := range f.Names {
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
	case "required":
		var out []schemaProblem
		for _, name := range f.Names {
			h := description(child(node, name))
			out = append(out, schemaProblem{
				code:    "SCHEMA-REQUIRED",
				pointer: ptr + "/" + escapePointer(name),
				message: fmt.Sprintf("missing required key %q", name),
				hint:    requiredHint(name, h),
			})
		}
		return out
	case "type":
		return []schemaProblem{{
			code:    "SCHEMA-TYPE",
			pointer: ptr,
			message: "wrong type: " + f.Message,
			hint:    typeHint(node, f.Value, hint),
		}}
	case "enum":
		msg, allowed := f.Message, ""
		if opts, ok := node["enum"].([]any); ok {
			list := make([]string, len(opts))
			for i, o := range opts {
				list[i] = display(o)
			}
			allowed = strings.Join(list, ", ")
			msg = fmt.Sprintf("%s is not allowed: use one of %s", display(f.Value), allowed)
		}
		return []schemaProblem{{
			code:    "SCHEMA-ENUM",
			pointer: ptr,
			message: msg,
			hint:    hint,
			allowed: allowed,
		}}
	}
	return []schemaProblem{{
		code:    "SCHEMA-VALUE",
		pointer: ptr,
		message: f.Message,
		hint:    hint,
	}}
}

// typeHint says what to write for a value of the wrong type: the value
// itself unquoted when it is a quoted number or boolean of the type wanted,
// else the JSON type wanted; then what the field is (desc).
func typeHint(node map[string]any, value any, desc string) string {
	var want []string
	switch t := node["type"].(type) {
	case string:
		want = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				want = append(want, s)
			}
		}
	}
	spelled := map[string]string{
		"boolean": "true or false (no quotes)", "integer": "a whole number (no quotes)", "number": "a number (no quotes)",
		"string": `a string in double quotes`, "array": "a list [ … ]", "object": "an object { … }", "null": "null",
	}
	var ways []string
	for _, w := range want {
		if str, ok := value.(string); ok && quotedValueFits(str, w) {
			ways = []string{str + " without the quotes"}
			break
		}
		if sp := spelled[w]; sp != "" {
			ways = append(ways, sp)
		}
	}
	if len(ways) == 0 {
		return desc
	}
	return "write " + strings.Join(ways, ", or ") + withDesc(desc)
}

// quotedValueFits reports whether the string s, unquoted, is a JSON value
// of type t (a quoted "3" where an integer is wanted).
func quotedValueFits(s, t string) bool {
	switch t {
	case "boolean":
		return s == "true" || s == "false"
	case "integer":
		_, err := strconv.ParseInt(s, 10, 64)
		return err == nil
	case "number":
		_, err := strconv.ParseFloat(s, 64)
		return err == nil && !strings.ContainsAny(s, "xXpP_") && !strings.EqualFold(s, "nan") && !strings.Contains(strings.ToLower(s), "inf")
	}
	return false
}

func display(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
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

// requiredHint is the hint of a missing required key name whose schema
// describes it as what ("" when it has no description).
func requiredHint(name, what string) string {
	if what == "" {
		return fmt.Sprintf("add %q", name)
	}
	return fmt.Sprintf("add %q: %s", name, what)
}
