package schema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kaptinlin/jsonschema"
)

// Failure is one keyword a value fails.
type Failure struct {
	// Keyword is the failing keyword ("type", "required", "enum",
	// "additionalProperties", ...).
	Keyword string
	// Message says what is wrong, in English.
	Message string
	// Instance holds the reference tokens of the failing value (none for
	// the value itself).
	Instance []string
	// Value is the failing value.
	Value any
	// SchemaPath is the JSON pointer of the failing keyword in the schema
	// document ("#/properties/count/minimum"), or "" when the keyword is
	// in another document.
	SchemaPath string
	// Node is the schema object holding the keyword, nil when unknown.
	Node map[string]any
	// Names lists the property names concerned: those missing for
	// "required", those not allowed for "additionalProperties" and
	// "unevaluatedProperties".
	Names []string
	// Params are the library's parameters of the message.
	Params map[string]any
	// OfName is set when the failing value is the member name at Instance
	// (propertyNames), not the member's value.
	OfName bool
}

// Pointer returns the JSON pointer of the failing value ("" for the value
// itself).
func (f Failure) Pointer() string {
	var b strings.Builder
	for _, t := range f.Instance {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

// Failures validates inst, a value in the form [Decode] returns, and
// returns one Failure per failing keyword (every one, not the first),
// sorted by location; nil when inst is valid.
func (s *Schema) Failures(inst any) []Failure {
	if fails := oversizedNumbers(inst, nil); len(fails) > 0 {
		return fails
	}
	if s.sub != nil {
		return s.subsetFailures(inst)
	}
	s.mu.Lock()
	res := s.sch.ValidateStruct(inst)
	s.mu.Unlock()
	if res == nil || res.IsValid() {
		return nil // the document is decoded only to word failures
	}
	doc, _ := s.document()
	return failuresOf(res, inst, doc)
}

// failuresOf turns the library's result of validating inst against the
// schema document doc into failures, sorted by location. With doc nil
// (the schema document is not at hand) the failures have no schema path
// and the library's wording.
func failuresOf(res *jsonschema.EvaluationResult, inst, doc any) []Failure {
	if res == nil || res.IsValid() {
		return nil
	}
	w := walker{root: doc}
	node, _ := doc.(map[string]any)
	spath := "#"
	if node == nil {
		spath = ""
	}
	w.walk(res, inst, nil, node, spath, false)
	if len(w.out) == 0 {
		// The library said invalid without saying where: report that
		// rather than passing the value.
		w.out = append(w.out, Failure{Keyword: "schema", Message: "value does not match the schema", Value: inst})
	}
	sortFailures(w.out)
	return w.out
}

// sortFailures sorts failures by location, then message, keeping the
// order in which they were found otherwise.
func sortFailures(fails []Failure) {
	sort.SliceStable(fails, func(i, j int) bool {
		pi, pj := fails[i].Pointer(), fails[j].Pointer()
		if pi != pj {
			return pi < pj
		}
		return fails[i].Message < fails[j].Message
	})
}

// walker turns the library's evaluation tree into failures. The tree's
// locations are relative to their parent and not escaped, and a required
// property that is absent is also evaluated as null against its schema;
// the walker follows the instance alongside the tree, so locations come
// out exact and those null evaluations are dropped.
type walker struct {
	root any
	out  []Failure
}

// applicators are the keywords whose failure is explained by the failures
// of their subschemas.
var applicators = map[string]bool{
	"properties": true, "items": true, "prefixItems": true, "$ref": true, "$dynamicRef": true,
	"allOf": true, "anyOf": true, "oneOf": true, "dependentSchemas": true, "contentSchema": true,
	"additionalProperties": true, "unevaluatedItems": true, "propertyNames": true, "contains": true,
	"patternProperties": true, "unevaluatedProperties": true, "if": true, "then": true, "else": true,
}

func (w *walker) walk(r *jsonschema.EvaluationResult, inst any, loc []string, node map[string]any, spath string, ofName bool) {
	before := len(w.out)
	absent := 0
	notAllowed := map[string][]string{} // additionalProperties / unevaluatedProperties → names
	for _, d := range r.Details {
		if d.Valid {
			continue
		}
		kw, arg, _ := strings.Cut(strings.TrimPrefix(d.EvaluationPath, "/"), "/")
		if !keywordFailed(r, kw) {
			continue // a subschema of a keyword that holds (an anyOf branch, an if, a not)
		}
		cInst, cLoc, cOfName := inst, loc, ofName
		tok := ""
		if kw == "propertyNames" {
			cInst, cLoc, cOfName = arg, append(slices.Clip(loc), arg), true
		} else if d.InstanceLocation != "" {
			tok = strings.TrimPrefix(d.InstanceLocation, "/")
			switch x := inst.(type) {
			case map[string]any:
				v, ok := x[tok]
				if !ok {
					absent++
					continue
				}
				cInst = v
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					absent++
					continue
				}
				cInst = x[i]
			default:
				absent++
				continue
			}
			cLoc = append(slices.Clip(loc), tok)
		}
		if (kw == "additionalProperties" || kw == "unevaluatedProperties") && isFalseSchema(d) {
			notAllowed[kw] = append(notAllowed[kw], tok)
			continue
		}
		cNode, cPath := w.child(node, spath, kw, arg)
		w.walk(d, cInst, cLoc, cNode, cPath, cOfName)
	}
	for _, kw := range []string{"additionalProperties", "unevaluatedProperties"} {
		names := notAllowed[kw]
		if len(names) == 0 {
			continue
		}
		sort.Strings(names)
		w.out = append(w.out, notAllowedFailure(kw, names, inst, loc, node, spath, ofName))
	}
	explained := len(w.out) > before || absent > 0
	kws := make([]string, 0, len(r.Errors))
	for kw := range r.Errors {
		kws = append(kws, kw)
	}
	sort.Strings(kws)
	for _, kw := range kws {
		e := r.Errors[kw]
		if explained && (applicators[kw] || strings.HasPrefix(e.Code, "unevaluated_propert")) {
			continue
		}
		w.out = append(w.out, keywordFailure(kw, e, inst, loc, node, spath, ofName))
	}
}

// notAllowedFailure is the failure of additionalProperties or
// unevaluatedProperties (kw) at loc: the members names (sorted) of inst
// are not allowed. node is the schema object at spath.
func notAllowedFailure(kw string, names []string, inst any, loc []string, node map[string]any, spath string, ofName bool) Failure {
	msg := "property " + quoteAll(names) + " is not allowed"
	if len(names) > 1 {
		msg = "properties " + quoteAll(names) + " are not allowed"
	}
	return Failure{Keyword: kw, Message: msg, Instance: loc, Value: inst,
		SchemaPath: keywordPath(spath, kw), Node: node, Names: names, OfName: ofName}
}

// keywordFailure is the failure of keyword kw (the library's error e) on
// inst at loc, worded from node, the schema object at spath.
func keywordFailure(kw string, e *jsonschema.EvaluationError, inst any, loc []string, node map[string]any, spath string, ofName bool) Failure {
	f := Failure{Keyword: kw, Message: e.Error(), Instance: loc, Value: inst,
		SchemaPath: keywordPath(spath, kw), Node: node, Params: e.Params, OfName: ofName}
	if m := ownMessage(kw, e.Code, node, inst, e.Params); m != "" {
		f.Message = m
	}
	if kw == "required" {
		f.Names = missing(node, inst, e)
		if len(f.Names) == 1 {
			f.Message = "missing required property " + quoteAll(f.Names)
		} else if len(f.Names) > 1 {
			f.Message = "missing required properties " + quoteAll(f.Names)
		}
	}
	return f
}

// ownMessage words the commonest failures more exactly than the library
// (quoting the values as JSON); "" keeps the library's message.
func ownMessage(kw, code string, node map[string]any, inst any, params map[string]any) string {
	switch {
	case kw == "enum" && node != nil:
		if opts, ok := node["enum"].([]any); ok {
			list := make([]string, len(opts))
			for i, o := range opts {
				list[i] = jsonText(o)
			}
			return "value " + jsonText(inst) + " must be one of " + strings.Join(list, ", ")
		}
	case kw == "enum":
		return fmt.Sprintf("value %s must be one of: %v", jsonText(inst), params["expected"])
	case kw == "const" && node != nil:
		if c, ok := node["const"]; ok {
			return "value " + jsonText(inst) + " must be " + jsonText(c)
		}
	case kw == "minimum":
		return fmt.Sprintf("%v is less than the minimum %v", params["value"], params["minimum"])
	case kw == "maximum":
		return fmt.Sprintf("%v is greater than the maximum %v", params["value"], params["maximum"])
	case kw == "exclusiveMinimum":
		return fmt.Sprintf("%v must be greater than %v (exclusive minimum)", params["value"], params["exclusive_minimum"])
	case kw == "exclusiveMaximum":
		return fmt.Sprintf("%v must be less than %v (exclusive maximum)", params["value"], params["exclusive_maximum"])
	case kw == "type" && code == "type_mismatch":
		want := fmt.Sprint(params["expected"])
		switch t := node["type"].(type) {
		case string:
			want = t
		case []any:
			names := make([]string, 0, len(t))
			for _, n := range t {
				names = append(names, fmt.Sprint(n))
			}
			want = strings.Join(names, " or ")
		}
		return fmt.Sprintf("got %v, want %s", params["received"], want)
	}
	return ""
}

// jsonText returns v as compact JSON text (bounded for long values).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// keywordFailed reports whether the keyword that produced the subresult
// at evaluation step kw failed: the library keeps the subresults of
// keywords that hold too.
func keywordFailed(r *jsonschema.EvaluationResult, kw string) bool {
	switch kw {
	case "":
		return r.Errors["$ref"] != nil || r.Errors["$dynamicRef"] != nil
	case "patternProperties", "unevaluatedProperties":
		return r.Errors["properties"] != nil || r.Errors[kw] != nil
	}
	return r.Errors[kw] != nil
}

// isFalseSchema reports whether d failed only because its schema is false.
func isFalseSchema(d *jsonschema.EvaluationResult) bool {
	if len(d.Errors) != 1 {
		return false
	}
	e, ok := d.Errors["schema"]
	return ok && e.Code == "false_schema_mismatch"
}

// missing returns the names required by node (or, when node is unknown,
// named by the library's message) that inst lacks.
func missing(node map[string]any, inst any, e *jsonschema.EvaluationError) []string {
	obj, _ := inst.(map[string]any)
	var names []string
	if req, ok := node["required"].([]any); ok {
		for _, r := range req {
			if n, ok := r.(string); ok {
				if _, has := obj[n]; !has && !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
		return names
	}
	for _, key := range []string{"property", "properties"} {
		if s, ok := e.Params[key].(string); ok {
			for _, n := range strings.Split(s, ", ") {
				names = append(names, strings.TrimSuffix(strings.TrimPrefix(n, "'"), "'"))
			}
		}
	}
	return names
}

// child returns the schema object (and its pointer) that the evaluation
// step kw/arg of node leads to; nil when it is not in this document.
func (w *walker) child(node map[string]any, spath, kw, arg string) (map[string]any, string) {
	if node == nil {
		return nil, ""
	}
	switch kw {
	case "":
		ref, ok := node["$ref"].(string)
		if !ok || (ref != "#" && !strings.HasPrefix(ref, "#/")) {
			return nil, ""
		}
		n, ok := pointerTo(w.root, ref[1:]).(map[string]any)
		if !ok {
			return nil, ""
		}
		return n, ref
	case "properties", "dependentSchemas":
		m, _ := node[kw].(map[string]any)
		n, ok := m[arg].(map[string]any)
		if !ok {
			return nil, ""
		}
		return n, spath + "/" + kw + "/" + escapeToken(arg)
	case "patternProperties":
		m, _ := node[kw].(map[string]any)
		pats := make([]string, 0, len(m))
		for p := range m {
			pats = append(pats, p)
		}
		sort.Strings(pats)
		for _, p := range pats {
			if re, err := regexp.Compile(p); err == nil && re.MatchString(arg) {
				n, _ := m[p].(map[string]any)
				return n, spath + "/" + kw + "/" + escapeToken(p)
			}
		}
		return nil, ""
	case "items", "prefixItems", "allOf", "anyOf", "oneOf":
		switch x := node[kw].(type) {
		case map[string]any:
			return x, spath + "/" + kw
		case []any:
			i, err := strconv.Atoi(arg)
			if err != nil || i < 0 || i >= len(x) {
				if kw == "items" {
					n, _ := node["additionalItems"].(map[string]any)
					return n, keywordPath(spath, "additionalItems")
				}
				return nil, ""
			}
			n, _ := x[i].(map[string]any)
			return n, spath + "/" + kw + "/" + arg
		}
		return nil, ""
	default:
		n, ok := node[kw].(map[string]any)
		if !ok {
			return nil, ""
		}
		return n, spath + "/" + kw
	}
}

func keywordPath(spath, kw string) string {
	if spath == "" {
		return ""
	}
	return spath + "/" + escapeToken(kw)
}

// pointerTo returns the value at JSON pointer ptr ("" or "/a/b") in doc.
func pointerTo(doc any, ptr string) any {
	if ptr == "" {
		return doc
	}
	cur := doc
	for _, t := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			cur = x[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
	}
	return cur
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// problemLines turns failures into one line each, "at /path: reason" or
// "at (root): reason", without repeats.
func problemLines(fails []Failure) []string {
	located := problemLinesOf(fails)
	lines := make([]string, len(located))
	for i, l := range located {
		ptr := l.ptr
		if ptr == "" {
			ptr = "(root)"
		}
		lines[i] = "at " + ptr + ": " + l.msg
	}
	return lines
}

// joinProblems lists problems (at most maxProblems, then how many more)
// separated by "; ".
func joinProblems(problems []string) string {
	if len(problems) <= maxProblems {
		return strings.Join(problems, "; ")
	}
	return strings.Join(problems[:maxProblems], "; ") + fmt.Sprintf("; and %d more", len(problems)-maxProblems)
}
