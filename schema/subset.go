package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kaptinlin/jsonschema"
)

// The subset validator checks values against capstan's own configuration
// schemas without the library: it implements only the keywords those
// schemas use, as draft 2020-12 defines them, and reports exactly the
// failures the library's verdict turns into (same keyword, message,
// location, value, schema path, parameters). CompileSubset refuses a
// schema that uses anything else; subsetEngine says when it runs.

// SubsetTable is a JSON Schema compiled ahead of time for the subset
// validator by [CompileSubset]. go generate writes capstan's configuration
// schemas' tables as Go source, so that checking a configuration file
// decodes and compiles no schema; pass a table as [Source].Subset. Other
// code has no use for it.
type SubsetTable struct {
	// Nodes are the schema objects of the document; Nodes[0] is the
	// root, which no node refers to (so 0 also means "none").
	Nodes []SubsetNode
}

// SubsetNode is one schema object of a [SubsetTable]. Other nodes are
// named by their index in the table (0: none); numbers by their JSON text
// ("": the keyword is absent).
type SubsetNode struct {
	// Path is the JSON pointer of the object in the document ("#",
	// "#/$defs/step/properties/c2"): the schema path of its failures.
	Path  string
	Ref   int
	Types []string
	Enum  []string
	AnyOf []int
	Items int
	// Properties are the declared properties, sorted by name.
	Properties []SubsetProperty
	// Additional is additionalProperties as a schema object;
	// NoAdditional is set when it is false (true holds for every member
	// and is left out).
	Additional   int
	NoAdditional bool
	Required     []string

	MinProperties, MinLength, MaxLength                  string
	Minimum, Maximum, ExclusiveMinimum, ExclusiveMaximum string
	// Pattern is the pattern keyword ("" holds for every string).
	Pattern string
}

// SubsetProperty is one member of properties: its name and its schema.
type SubsetProperty struct {
	Name string
	Node int
}

// jsonTypes are the names the type keyword takes.
var jsonTypes = map[string]bool{
	"null": true, "boolean": true, "object": true, "array": true, "number": true, "integer": true, "string": true,
}

// CompileSubset compiles the schema document raw for the subset validator.
// It refuses, with the reason, any document the subset validator might
// judge differently from the library: another draft than 2020-12, a
// keyword it does not implement ($schema, $id, $defs, $ref, type, enum,
// anyOf, items, properties, additionalProperties, required,
// minProperties, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// minLength, maxLength, pattern; annotations are left out), $id below the
// root, a boolean schema other than additionalProperties, a reference
// that is not a JSON pointer into the document (or names the root),
// references or anyOf that lead back to the same schema without entering
// a member or an item, an enum with other than strings, a pattern Go's
// regexp does not compile.
func CompileSubset(raw []byte) (*SubsetTable, error) {
	doc, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	d, err := draftOf(doc)
	if err != nil {
		return nil, err
	}
	if d != draft202012 {
		return nil, fmt.Errorf("draft %s: the subset validator implements 2020-12 only", d.name)
	}
	c := subsetCompiler{index: map[string]int{}}
	if _, err := c.node(doc, "#", 0); err != nil {
		return nil, err
	}
	for i := 0; i < len(c.refs); i++ { // compiling a target may add references
		r := c.refs[i]
		target, ok := c.index[r.ref]
		if !ok {
			v := pointerTo(doc, r.ref[1:])
			if v == nil {
				return nil, fmt.Errorf("at %s: reference %q does not resolve in the document", c.t.Nodes[r.from].Path, r.ref)
			}
			if target, err = c.node(v, r.ref, 0); err != nil {
				return nil, err
			}
		}
		c.t.Nodes[r.from].Ref = target
	}
	if err := c.t.check(); err != nil {
		return nil, err
	}
	return &c.t, nil
}

// subsetCompiler builds the table of one document.
type subsetCompiler struct {
	t     SubsetTable
	index map[string]int // node by path
	refs  []pendingRef
}

// pendingRef is a $ref whose target is compiled once the whole document
// is walked.
type pendingRef struct {
	from int
	ref  string
}

func (c *subsetCompiler) node(v any, path string, depth int) (int, error) {
	if i, ok := c.index[path]; ok {
		return i, nil
	}
	if depth > maxDepth {
		return 0, fmt.Errorf("at %s: schemas nested deeper than %d levels", path, maxDepth)
	}
	m, ok := v.(map[string]any)
	if !ok {
		// The library's failures under a boolean schema have no schema
		// path: the subset validator implements true and false as
		// additionalProperties only.
		return 0, fmt.Errorf("at %s: a schema must be an object (true and false only as additionalProperties)", path)
	}
	i := len(c.t.Nodes)
	c.index[path] = i
	c.t.Nodes = append(c.t.Nodes, SubsetNode{Path: path})
	b := nodeBuilder{c: c, at: i, path: path, depth: depth}
	n := SubsetNode{Path: path} // filled here, stored at the end (c.t.Nodes grows meanwhile)
	for _, kw := range slices.Sorted(maps.Keys(m)) {
		if err := b.keyword(&n, kw, m[kw]); err != nil {
			return 0, err
		}
	}
	c.t.Nodes[i] = n
	return i, nil
}

// nodeBuilder compiles the keywords of one schema object, node at, found
// at path, depth levels below the root.
type nodeBuilder struct {
	c     *subsetCompiler
	at    int
	path  string
	depth int
}

// fail is the error of keyword kw of the node.
func (b nodeBuilder) fail(kw, what string) error {
	return fmt.Errorf("at %s: %s %s", keywordPath(b.path, kw), kw, what)
}

// sub compiles the subschema v at path p.
func (b nodeBuilder) sub(p string, v any) (int, error) { return b.c.node(v, p, b.depth+1) }

// number is a number keyword's value, of ordinary size.
func (b nodeBuilder) number(kw string, x any) (string, error) {
	num, ok := x.(json.Number)
	if !ok || oversized(num) {
		return "", b.fail(kw, "must be a number of ordinary size")
	}
	return string(num), nil
}

// count is a count keyword's value: a non-negative integer.
func (b nodeBuilder) count(kw string, x any) (string, error) {
	num, ok := x.(json.Number)
	if _, err := strconv.ParseUint(string(num), 10, 31); !ok || err != nil {
		return "", b.fail(kw, "must be a non-negative integer written without fraction or exponent")
	}
	return string(num), nil
}

// strings is a keyword's list of strings (what: the error when it is not
// one).
func (b nodeBuilder) strings(kw string, x any, what string) ([]string, error) {
	list, ok := x.([]any)
	if !ok {
		return nil, b.fail(kw, what)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, b.fail(kw, what)
		}
		out = append(out, s)
	}
	return out, nil
}

// keyword compiles keyword kw, of value x, into n; a keyword the subset
// validator does not implement is refused.
func (b nodeBuilder) keyword(n *SubsetNode, kw string, x any) error {
	var err error
	switch kw {
	case "$schema":
		if b.path != "#" {
			err = b.fail(kw, "is only allowed at the root")
		}
	case "$id":
		if b.path != "#" {
			err = b.fail(kw, "is only allowed at the root (it would change the base of references)")
		}
	case "$defs", "$ref", "anyOf", "items", "additionalProperties", "properties":
		err = b.subschemas(n, kw, x)
	case "type":
		n.Types, err = b.types(x)
	case "enum":
		if list, ok := x.([]any); !ok || len(list) == 0 {
			return b.fail(kw, "must be a non-empty list")
		}
		n.Enum, err = b.strings(kw, x, "must list strings only")
	case "required":
		n.Required, err = b.strings(kw, x, "must be a list of names")
	case "minimum":
		n.Minimum, err = b.number(kw, x)
	case "maximum":
		n.Maximum, err = b.number(kw, x)
	case "exclusiveMinimum":
		n.ExclusiveMinimum, err = b.number(kw, x)
	case "exclusiveMaximum":
		n.ExclusiveMaximum, err = b.number(kw, x)
	case "minLength":
		n.MinLength, err = b.count(kw, x)
	case "maxLength":
		n.MaxLength, err = b.count(kw, x)
	case "minProperties":
		n.MinProperties, err = b.count(kw, x)
	case "pattern":
		s, ok := x.(string)
		if !ok {
			return b.fail(kw, "must be a string")
		}
		if _, err := regexp.Compile(s); err != nil {
			return b.fail(kw, "is not a regular expression Go compiles: "+err.Error())
		}
		n.Pattern = s
	default:
		if !annotations[kw] {
			return b.fail(kw, "is not implemented by the subset validator")
		}
	}
	return err
}

// types is the type keyword's value: a type name or a list of them.
func (b nodeBuilder) types(x any) ([]string, error) {
	const kw = "type"
	var types []string
	switch t := x.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, b.fail(kw, "must list type names")
			}
			types = append(types, s)
		}
	default:
		return nil, b.fail(kw, "must be a type name or a list of them")
	}
	for _, t := range types {
		if !jsonTypes[t] {
			return nil, b.fail(kw, fmt.Sprintf("names an unknown type %q", t))
		}
	}
	return types, nil
}

// subschemas compiles the keywords whose values are or hold schemas:
// $defs, $ref (resolved when the whole document is compiled), anyOf,
// items, additionalProperties and properties.
func (b nodeBuilder) subschemas(n *SubsetNode, kw string, x any) error {
	var err error
	switch kw {
	case "$defs":
		defs, ok := x.(map[string]any)
		if !ok {
			return b.fail(kw, "must be an object")
		}
		for _, name := range slices.Sorted(maps.Keys(defs)) {
			if _, err := b.sub(keywordPath(b.path, kw)+"/"+escapeToken(name), defs[name]); err != nil {
				return err
			}
		}
	case "$ref":
		ref, ok := x.(string)
		if !ok || !strings.HasPrefix(ref, "#/") {
			return b.fail(kw, "must be a JSON pointer into the document, below its root")
		}
		b.c.refs = append(b.c.refs, pendingRef{from: b.at, ref: ref})
	case "anyOf":
		list, ok := x.([]any)
		if !ok || len(list) == 0 {
			return b.fail(kw, "must be a non-empty list of schemas")
		}
		for j, e := range list {
			s, err := b.sub(keywordPath(b.path, kw)+"/"+strconv.Itoa(j), e)
			if err != nil {
				return err
			}
			n.AnyOf = append(n.AnyOf, s)
		}
	case "items":
		n.Items, err = b.sub(keywordPath(b.path, kw), x)
	case "additionalProperties":
		if v, ok := x.(bool); ok {
			n.NoAdditional = !v
		} else {
			n.Additional, err = b.sub(keywordPath(b.path, kw), x)
		}
	case "properties":
		props, ok := x.(map[string]any)
		if !ok {
			return b.fail(kw, "must be an object")
		}
		for _, name := range slices.Sorted(maps.Keys(props)) {
			p, err := b.sub(keywordPath(b.path, kw)+"/"+escapeToken(name), props[name])
			if err != nil {
				return err
			}
			n.Properties = append(n.Properties, SubsetProperty{Name: name, Node: p})
		}
	}
	return err
}

// check refuses a table whose node indexes are out of range, whose
// properties are not sorted, whose numbers are not numbers, and one
// whose references and anyOf branches lead from a schema back to itself
// for the same value (without entering a member or an item): the library
// breaks such a loop by checking the schema again without its
// references, which the subset validator does not implement.
func (t *SubsetTable) check() error {
	if len(t.Nodes) == 0 {
		return fmt.Errorf("a subset table has at least its root")
	}
	valid := func(from, i int) error {
		if i < 0 || i >= len(t.Nodes) {
			return fmt.Errorf("node %d (%s) names node %d, which the table does not have", from, t.Nodes[from].Path, i)
		}
		return nil
	}
	for from := range t.Nodes {
		n := &t.Nodes[from]
		for _, k := range [...]int{n.Ref, n.Items, n.Additional} {
			if err := valid(from, k); err != nil {
				return err
			}
		}
		for _, k := range n.AnyOf {
			if err := valid(from, k); err != nil {
				return err
			}
		}
		for j, p := range n.Properties {
			if err := valid(from, p.Node); err != nil {
				return err
			}
			if j > 0 && n.Properties[j-1].Name >= p.Name {
				return fmt.Errorf("node %d (%s): the properties are not sorted by name without repeats", from, n.Path)
			}
		}
		for _, c := range [...]string{n.MinProperties, n.MinLength, n.MaxLength} {
			if c == "" {
				continue
			}
			if _, err := strconv.ParseUint(c, 10, 31); err != nil {
				return fmt.Errorf("node %d (%s): count %q is not a non-negative integer", from, n.Path, c)
			}
		}
		for _, b := range [...]string{n.Minimum, n.Maximum, n.ExclusiveMinimum, n.ExclusiveMaximum} {
			if b != "" && !isNumber(b) {
				return fmt.Errorf("node %d (%s): bound %q is not a number of ordinary size", from, n.Path, b)
			}
		}
	}
	const (
		unvisited = iota
		active
		done
	)
	state := make([]uint8, len(t.Nodes))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case active:
			return fmt.Errorf("at %s: references lead back to this schema for the same value", t.Nodes[i].Path)
		case done:
			return nil
		}
		state[i] = active
		n := &t.Nodes[i]
		for _, b := range n.AnyOf {
			if err := visit(b); err != nil {
				return err
			}
		}
		if n.Ref != 0 {
			if err := visit(n.Ref); err != nil {
				return err
			}
		}
		state[i] = done
		return nil
	}
	for i := range t.Nodes {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

// subsetSchema is a SubsetTable ready to validate. Its patterns are
// compiled the first time a string is checked against each.
type subsetSchema struct {
	t        *SubsetTable
	mu       sync.Mutex
	patterns map[string]*regexp.Regexp // nil: the pattern does not compile
}

func newSubsetSchema(t *SubsetTable) *subsetSchema {
	return &subsetSchema{t: t, patterns: map[string]*regexp.Regexp{}}
}

// pattern returns the pattern p compiled, nil when it does not compile.
func (s *subsetSchema) pattern(p string) *regexp.Regexp {
	s.mu.Lock()
	defer s.mu.Unlock()
	re, ok := s.patterns[p]
	if !ok {
		re, _ = regexp.Compile(p)
		s.patterns[p] = re
	}
	return re
}

// subsetFailure is a failure found by the subset validator, before it is
// worded: node failed keyword kw (err, or names not allowed by
// additionalProperties) on inst at loc.
type subsetFailure struct {
	node  int
	kw    string
	err   *jsonschema.EvaluationError
	names []string
	inst  any
	loc   []string
}

// check appends to out the failures of inst (at loc) against node i, in
// the order the library's evaluation lists them: those under $ref, under
// anyOf's branches, under items, under properties and
// additionalProperties, then the members not allowed, then the node's own
// failing keywords by name. Only the keywords that are not applicators are
// reported: an applicator fails only because something under it fails,
// which is reported (the library's failures are read the same way).
func (s *subsetSchema) check(i int, inst any, loc []string, out []subsetFailure) []subsetFailure {
	n := &s.t.Nodes[i]
	if n.Ref != 0 {
		out = s.check(n.Ref, inst, loc, out)
	}
	if len(n.AnyOf) > 0 {
		start := len(out)
		for _, b := range n.AnyOf {
			before := len(out)
			if out = s.check(b, inst, loc, out); len(out) == before {
				out = out[:start] // one branch holds: anyOf holds
				break
			}
		}
	}
	var own []*jsonschema.EvaluationError
	typ, num := typeOf(inst)
	if len(n.Types) > 0 && !slices.Contains(n.Types, typ) && (typ != "integer" || !slices.Contains(n.Types, "number")) {
		own = append(own, jsonschema.NewEvaluationError("type", "type_mismatch", "Value is {received} but should be {expected}",
			map[string]any{"expected": strings.Join(n.Types, ", "), "received": typ}))
	}
	if n.Enum != nil {
		if str, ok := inst.(string); !ok || !slices.Contains(n.Enum, str) {
			own = append(own, jsonschema.NewEvaluationError("enum", "value_not_in_enum", "Value {received} should be one of the allowed values: {expected}",
				map[string]any{"expected": strings.Join(n.Enum, ", "), "received": inst}))
		}
	}
	switch x := inst.(type) {
	case []any:
		if n.Items != 0 {
			for j, e := range x {
				out = s.check(n.Items, e, append(slices.Clip(loc), strconv.Itoa(j)), out)
			}
		}
	case string:
		own = s.checkString(n, x, own)
	case map[string]any:
		out, own = s.checkObject(i, x, loc, out, own)
	default:
		if num != nil {
			own = checkNumber(n, num, own)
		}
	}
	if len(own) > 1 {
		sort.Slice(own, func(a, b int) bool { return own[a].Keyword < own[b].Keyword })
	}
	for _, e := range own {
		out = append(out, subsetFailure{node: i, kw: e.Keyword, err: e, inst: inst, loc: loc})
	}
	return out
}

func (s *subsetSchema) checkString(n *SubsetNode, str string, own []*jsonschema.EvaluationError) []*jsonschema.EvaluationError {
	if n.MaxLength != "" {
		max := countOf(n.MaxLength)
		if l := utf8.RuneCountInString(str); l > int(max) {
			own = append(own, jsonschema.NewEvaluationError("maxLength", "string_too_long", "Value should be at most {max_length} characters",
				map[string]any{"max_length": fmt.Sprintf("%.0f", max), "length": l}))
		}
	}
	if n.MinLength != "" {
		min := countOf(n.MinLength)
		if l := utf8.RuneCountInString(str); l < int(min) {
			own = append(own, jsonschema.NewEvaluationError("minLength", "string_too_short", "Value should be at least {min_length} characters",
				map[string]any{"min_length": min, "length": l}))
		}
	}
	if n.Pattern != "" {
		re := s.pattern(n.Pattern)
		if re == nil {
			own = append(own, jsonschema.NewEvaluationError("pattern", "invalid_pattern", "Invalid regular expression pattern {pattern}",
				map[string]any{"pattern": n.Pattern}))
		} else if !re.MatchString(str) {
			own = append(own, jsonschema.NewEvaluationError("pattern", "pattern_mismatch", "Value does not match the required pattern {pattern}",
				map[string]any{"pattern": n.Pattern, "value": str}))
		}
	}
	return own
}

// isNumber reports whether text is a JSON number of ordinary size.
func isNumber(text string) bool {
	var n json.Number
	err := json.Unmarshal([]byte(text), &n)
	return err == nil && string(n) == text && !oversized(n)
}

// countOf returns the value of minLength, maxLength or minProperties as
// the library holds it.
func countOf(text string) float64 {
	f, _ := strconv.ParseFloat(text, 64)
	return f
}

func checkNumber(n *SubsetNode, v *jsonschema.Rat, own []*jsonschema.EvaluationError) []*jsonschema.EvaluationError {
	bound := func(text string) *jsonschema.Rat {
		if text == "" {
			return nil
		}
		return jsonschema.NewRat(json.Number(text))
	}
	if b := bound(n.Maximum); b != nil && v.Cmp(b.Rat) > 0 {
		own = append(own, jsonschema.NewEvaluationError("maximum", "value_above_maximum", "{value} should be at most {maximum}",
			map[string]any{"value": jsonschema.FormatRat(v), "maximum": jsonschema.FormatRat(b)}))
	}
	if b := bound(n.ExclusiveMaximum); b != nil && v.Cmp(b.Rat) >= 0 {
		own = append(own, jsonschema.NewEvaluationError("exclusiveMaximum", "exclusive_maximum_mismatch", "{value} should be less than {exclusive_maximum}",
			map[string]any{"exclusive_maximum": jsonschema.FormatRat(b), "value": jsonschema.FormatRat(v)}))
	}
	if b := bound(n.Minimum); b != nil && v.Cmp(b.Rat) < 0 {
		own = append(own, jsonschema.NewEvaluationError("minimum", "value_below_minimum", "{value} should be at least {minimum}",
			map[string]any{"value": jsonschema.FormatRat(v), "minimum": jsonschema.FormatRat(b)}))
	}
	if b := bound(n.ExclusiveMinimum); b != nil && v.Cmp(b.Rat) <= 0 {
		own = append(own, jsonschema.NewEvaluationError("exclusiveMinimum", "exclusive_minimum_mismatch", "{value} should be greater than {exclusive_minimum}",
			map[string]any{"exclusive_minimum": jsonschema.FormatRat(b), "value": jsonschema.FormatRat(v)}))
	}
	return own
}

func (s *subsetSchema) checkObject(i int, obj map[string]any, loc []string, out []subsetFailure, own []*jsonschema.EvaluationError) ([]subsetFailure, []*jsonschema.EvaluationError) {
	n := &s.t.Nodes[i]
	for _, p := range n.Properties {
		if v, ok := obj[p.Name]; ok {
			out = s.check(p.Node, v, append(slices.Clip(loc), p.Name), out)
		}
	}
	if n.Additional != 0 || n.NoAdditional {
		var names []string
		for name, v := range obj {
			if _, declared := slices.BinarySearchFunc(n.Properties, name, func(p SubsetProperty, name string) int {
				return strings.Compare(p.Name, name)
			}); declared {
				continue
			}
			if n.NoAdditional {
				names = append(names, name)
			} else {
				out = s.check(n.Additional, v, append(slices.Clip(loc), name), out)
			}
		}
		if len(names) > 0 {
			sort.Strings(names)
			out = append(out, subsetFailure{node: i, kw: "additionalProperties", names: names, inst: obj, loc: loc})
		}
	}
	if n.MinProperties != "" {
		if min := countOf(n.MinProperties); float64(len(obj)) < min {
			own = append(own, jsonschema.NewEvaluationError("minProperties", "too_few_properties", "Value should have at least {min_properties} properties",
				map[string]any{"min_properties": min}))
		}
	}
	if len(n.Required) > 0 {
		var miss []string
		for _, name := range n.Required {
			if _, ok := obj[name]; !ok {
				miss = append(miss, "'"+name+"'")
			}
		}
		switch len(miss) {
		case 0:
		case 1:
			own = append(own, jsonschema.NewEvaluationError("required", "missing_required_property", "Required property {property} is missing",
				map[string]any{"property": miss[0]}))
		default:
			own = append(own, jsonschema.NewEvaluationError("required", "missing_required_properties", "Required properties {properties} are missing",
				map[string]any{"properties": strings.Join(miss, ", ")}))
		}
	}
	return out, own
}

// typeOf returns the JSON type of v, a value in the form Decode returns
// (numbers as json.Number or float64), and a number's exact value:
// "integer" for a number without a fractional part, "unknown" for what is
// not JSON.
func typeOf(v any) (string, *jsonschema.Rat) {
	switch v.(type) {
	case nil:
		return "null", nil
	case bool:
		return "boolean", nil
	case string:
		return "string", nil
	case []any:
		return "array", nil
	case map[string]any:
		return "object", nil
	case json.Number, float64:
		r := jsonschema.NewRat(v)
		switch {
		case r == nil:
			return "unknown", nil
		case r.IsInt():
			return "integer", r
		}
		return "number", r
	}
	return "unknown", nil
}

// subsetFailures validates inst against the subset table of s. The full
// document is decoded only when there are failures to word.
func (s *Schema) subsetFailures(inst any) []Failure {
	found := s.sub.check(0, inst, nil, nil)
	if len(found) == 0 {
		return nil
	}
	doc, _ := s.document()
	fails := make([]Failure, len(found))
	for i, f := range found {
		path := s.sub.t.Nodes[f.node].Path
		node, _ := pointerTo(doc, path[1:]).(map[string]any)
		if f.err == nil {
			fails[i] = notAllowedFailure(f.kw, f.names, f.inst, f.loc, node, path, false)
		} else {
			fails[i] = keywordFailure(f.kw, f.err, f.inst, f.loc, node, path, false)
		}
	}
	sortFailures(fails)
	return fails
}

// annotations are the keywords that only describe a value (for people and
// editors) and never decide whether it is valid.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}
