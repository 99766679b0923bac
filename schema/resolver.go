// Package schema resolves the JSON Schemas that steps name into
// self-contained schemas a structured-output API accepts, and validates
// structured output against them.
//
// [Resolver.Resolve] turns a named schema in a schema file into one
// self-contained JSON Schema that a structured-output API accepts: every
// $ref (to another file or inside a file) inlined, allOf merged into a
// single schema, additionalProperties:false added to every object schema
// that does not set it, and $defs/definitions dropped. [Compile] and
// [Validator.Validate] check values against a schema and report each
// problem in a form that can be fed back to a model. [ExtractJSON] recovers
// JSON from a model's prose answer, through the fenced code blocks
// [CodeBlocks] finds in it (which the completion signals of verdict read
// too).
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
	"github.com/capstan-dev/capstan/internal/regularfile"
)

// maxFileBytes bounds the size of one schema file.
const maxFileBytes = 16 << 20

// maxNodes bounds the number of JSON values a resolution may produce, so
// that schemas whose $refs multiply (a ref used twice by a schema used
// twice ...) fail instead of exhausting memory.
const maxNodes = 500_000

// Resolver resolves named schemas from the schema files of one directory.
// It caches parsed files and resolved schemas for its lifetime and is safe
// for concurrent use; create a new Resolver to pick up edited files.
type Resolver struct {
	dir  string
	fsys fs.FS // when set, the schema files are read from it, not from dir

	mu       sync.Mutex
	files    map[string]any         // slash path relative to dir → parsed file
	texts    map[string][]byte      // slash path relative to dir → its text, to locate problems
	resolved map[[2]string]resolved // {file, name} → result
}

// resolved is one named schema, resolved.
type resolved struct {
	raw json.RawMessage
	// draft is the JSON Schema draft its files declare ($schema), 2020-12
	// when none does. The resolved document itself carries no $schema.
	draft *draft
}

// NewResolver returns a Resolver for the schema files under dir.
func NewResolver(dir string) *Resolver {
	return &Resolver{dir: dir, files: map[string]any{}, texts: map[string][]byte{}, resolved: map[[2]string]resolved{}}
}

// NewResolverFS returns a Resolver for the schema files in fsys (paths
// relative to the schema directory, such as a sub-tree of a pinned agent
// definition snapshot). dir is the schema directory named in messages.
func NewResolverFS(fsys fs.FS, dir string) *Resolver {
	r := NewResolver(dir)
	r.fsys = fsys
	return r
}

// Dir returns the directory the Resolver reads from.
func (r *Resolver) Dir() string { return r.dir }

// Resolve returns the self-contained schema called name in file. file is
// relative to the resolver's directory and must stay inside it. name is a
// top-level key of the file, a key of its $defs or definitions (looked up
// in that order), a JSON pointer starting with "#/", or "" or "#" for the
// whole file.
//
// The result has every $ref inlined (external refs resolved relative to the
// file they appear in, internal refs against that file's root), allOf
// merged (properties merged, required unioned, types intersected, numeric
// bounds tightened, enums intersected; any other conflict is an error),
// additionalProperties:false on every object schema that sets neither
// additionalProperties nor unevaluatedProperties, and no
// $defs/definitions/$id/$schema/$anchor. Object keys keep their order.
//
// Errors have code SCHEMA_RESOLUTION and name the file and JSON pointer of
// the problem: a missing file or name, a dangling or cyclic $ref (structured
// output cannot describe recursive data), a remote or absolute ref, a path
// leaving the directory, or conflicting allOf members.
func (r *Resolver) Resolve(file, name string) (json.RawMessage, error) {
	res, err := r.resolve(file, name)
	if err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), res.raw...), nil
}

// resolve is [Resolver.Resolve], with the draft the schema's files declare.
// Every file the resolution reads must declare the same draft or none (the
// draft decides whether format is asserted); the schemas of a file of an
// earlier draft are rewritten into their 2020-12 form as they are inlined.
func (r *Resolver) resolve(file, name string) (resolved, error) {
	key := [2]string{file, name}
	r.mu.Lock()
	if out, ok := r.resolved[key]; ok {
		r.mu.Unlock()
		return out, nil
	}
	r.mu.Unlock()

	rel, err := cleanRel(".", file)
	if err != nil {
		return resolved{}, hint(resErr(file, "", "schema file %q is not a relative path inside the schema directory", file), "name a file inside "+r.dir)
	}
	root, err := r.load(rel)
	if err != nil {
		return resolved{}, err
	}
	ptr, node, err := lookupName(root, name)
	if err != nil {
		return resolved{}, wrap(hint(resErr(rel, "", "no schema named %q in %s", name, rel), "use a top-level key, a $defs/definitions key or a JSON pointer like #/properties/x"), err)
	}
	st := &state{r: r, budget: maxNodes}
	if err := st.noteDraft(rel, root); err != nil {
		return resolved{}, err
	}
	st.stack = append(st.stack, refKey(rel, ptr))
	out, err := st.resolve(rel, node, ptr, 0)
	if err != nil {
		return resolved{}, err
	}
	addAdditionalProperties(out, 0)
	var buf bytes.Buffer
	if err := encodeJSON(&buf, out); err != nil {
		return resolved{}, resErr(rel, ptr, "%v", err)
	}
	res := resolved{raw: json.RawMessage(buf.Bytes()), draft: draft202012}
	if st.draft != nil {
		res.draft = st.draft
	}
	r.mu.Lock()
	r.resolved[key] = res
	r.mu.Unlock()
	return res, nil
}

// load returns the parsed schema file rel (a clean slash path relative to
// the directory), reading it through an os.Root so that neither ".." nor
// symlinks lead outside the directory.
func (r *Resolver) load(rel string) (any, error) {
	r.mu.Lock()
	doc, ok := r.files[rel]
	r.mu.Unlock()
	if ok {
		return doc, nil
	}
	f, err := r.open(rel)
	if err != nil {
		if errors.Is(err, errNoDir) {
			return nil, hint(wrap(resErr(rel, "", "cannot open schema directory %s", r.dir), err), "create the schema directory or fix its path")
		}
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
			return nil, hint(resErr(rel, "", "schema file %s leads outside the schema directory (through a symlink)", rel), "keep schema files inside "+r.dir)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, hint(resErr(rel, "", "schema file %s not found in %s", rel, r.dir), "create the file or fix the reference")
		}
		if nr := (*regularfile.NotRegularError)(nil); errors.As(err, &nr) {
			return nil, notRegular(rel)
		}
		return nil, wrap(resErr(rel, "", "cannot read schema file"), err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, notRegular(rel)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, wrap(resErr(rel, "", "cannot read schema file"), err)
	}
	if len(data) > maxFileBytes {
		return nil, resErr(rel, "", "schema file is larger than %d bytes", maxFileBytes)
	}
	doc, err = decodeJSON(data)
	if err != nil {
		e := hint(wrap(resErr(rel, "", "invalid JSON"), err), "fix the JSON syntax")
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			e.Line, e.Column = jsonvalue.NewIndex(data).Position(int(se.Offset))
		case errors.Is(err, io.ErrUnexpectedEOF):
			e.Line, e.Column = jsonvalue.NewIndex(data).Position(len(data)) // the text ends too early
		}
		return nil, e
	}
	if _, ok := doc.(*object); !ok {
		return nil, hint(resErr(rel, "", "%v", errNotJSONObject), "a schema file is a JSON object")
	}
	r.mu.Lock()
	r.files[rel] = doc
	r.texts[rel] = data
	r.mu.Unlock()
	return doc, nil
}

// notRegular is the error for a schema file rel that is a directory, a
// FIFO or a device.
func notRegular(rel string) *agenterr.Error {
	return hint(resErr(rel, "", "schema file %s is not a regular file", rel), "point the reference at a .json file")
}

// errNoDir marks a schema directory that cannot be opened.
var errNoDir = errors.New("schema directory cannot be opened")

// open opens the schema file rel: from the resolver's file system, or
// through an os.Root on its directory so that neither ".." nor symlinks
// lead outside it.
func (r *Resolver) open(rel string) (fs.File, error) {
	if r.fsys != nil {
		return r.fsys.Open(rel)
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoDir, err)
	}
	defer root.Close()
	// A FIFO planted in place of a schema file must not block the read.
	f, _, err := regularfile.Open(root.OpenFile, filepath.FromSlash(rel))
	if err != nil {
		return nil, err
	}
	return f, nil
}

// cleanRel joins p (a slash path) to the directory dir (a clean slash path
// relative to the schema directory) and checks that the result stays inside
// the schema directory.
func cleanRel(dir, p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) || strings.Contains(p, `\`) || path.IsAbs(p) || filepath.IsAbs(p) || filepath.VolumeName(p) != "" {
		return "", errors.New("not a relative path")
	}
	j := path.Clean(path.Join(dir, p))
	if j == "." || j == ".." || strings.HasPrefix(j, "../") || !filepath.IsLocal(filepath.FromSlash(j)) {
		return "", errors.New("outside the schema directory")
	}
	return j, nil
}

// lookupName finds name in a parsed file and returns its JSON pointer.
func lookupName(root any, name string) (string, any, error) {
	if name == "" || name == "#" {
		return "", root, nil
	}
	if strings.HasPrefix(name, "#/") {
		ptr, err := url.PathUnescape(name[1:])
		if err != nil {
			ptr = name[1:]
		}
		v, err := resolvePointer(root, ptr)
		return ptr, v, err
	}
	o := root.(*object)
	if v, ok := o.get(name); ok {
		return "/" + escapeToken(name), v, nil
	}
	for _, defs := range []string{"$defs", "definitions"} {
		if d, ok := o.get(defs); ok {
			if do, ok := d.(*object); ok {
				if v, ok := do.get(name); ok {
					return "/" + defs + "/" + escapeToken(name), v, nil
				}
			}
		}
	}
	return "", nil, fmt.Errorf("%q is not a top-level, $defs or definitions key", name)
}

// resolvePointer follows the JSON pointer ptr ("" or "/a/b") in v.
func resolvePointer(v any, ptr string) (any, error) {
	if ptr == "" {
		return v, nil
	}
	if ptr[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", ptr)
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case *object:
			next, ok := x.get(tok)
			if !ok {
				return nil, fmt.Errorf("no %q in %s", tok, ptr)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || tok != strconv.Itoa(i) {
				return nil, fmt.Errorf("no index %q in %s", tok, ptr)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("cannot descend into a %s at %q in %s", kindOf(v), tok, ptr)
		}
	}
	return v, nil
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func refKey(file, ptr string) string { return file + "#" + ptr }

func kindOf(v any) string {
	switch v.(type) {
	case *object:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	default:
		return "null"
	}
}

// state is one resolution in progress.
type state struct {
	r      *Resolver
	stack  []string // refs being resolved, outermost first (cycle detection)
	budget int
	// visit, when set, is called with every schema a $ref leads to.
	visit func(file, ptr string, node any)
	// draft is the draft the files read so far declare (nil: none has),
	// and draftFile the first file that declared it.
	draft     *draft
	draftFile string
	// older maps each file read that declares a draft before 2020-12 to
	// it: its schemas are rewritten into their 2020-12 form (modernize).
	older map[string]*draft
}

// noteDraft records the draft the schema file rel (parsed as root)
// declares with $schema, if any. A $schema capstan does not know, or a
// draft other than one an earlier file of the resolution declared, is an
// error: the resolved schema is one document, checked against one draft.
func (st *state) noteDraft(rel string, root any) error {
	o, ok := root.(*object)
	if !ok {
		return nil
	}
	v, ok := o.get("$schema")
	if !ok {
		return nil
	}
	s, isStr := v.(string)
	if !isStr {
		return hint(resErr(rel, "/$schema", "$schema must be a string naming a JSON Schema draft"), "use a draft's URL, for example "+strconv.Quote(draft202012.meta))
	}
	d, err := draftNamed(s)
	if err != nil {
		return hint(resErr(rel, "/$schema", "%v", err), "name one of those drafts")
	}
	if d != draft202012 {
		if st.older == nil {
			st.older = map[string]*draft{}
		}
		st.older[rel] = d
	}
	switch {
	case st.draft == nil:
		st.draft, st.draftFile = d, rel
	case st.draft != d:
		return hint(resErr(rel, "/$schema", "%s declares JSON Schema %s, but %s, whose $refs lead here, declares %s: once the $refs are inlined, one draft applies to the whole schema", rel, d.name, st.draftFile, st.draft.name),
			"give the schema files that refer to each other the same $schema")
	}
	return nil
}

// Keywords whose values are schemas, maps of schemas or arrays of schemas.
var (
	schemaKeywords = map[string]bool{
		"items": true, "additionalItems": true, "additionalProperties": true,
		"unevaluatedProperties": true, "unevaluatedItems": true, "contains": true,
		"propertyNames": true, "not": true, "if": true, "then": true, "else": true,
		"contentSchema": true,
	}
	// partialKeywords hold subschemas that constrain part of an instance
	// alongside the schema they sit in.
	partialKeywords = map[string]bool{
		"if": true, "then": true, "else": true, "not": true, "dependentSchemas": true,
	}
	schemaMapKeywords = map[string]bool{
		"properties": true, "patternProperties": true, "dependentSchemas": true,
	}
	schemaArrayKeywords = map[string]bool{
		"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true,
	}
	// droppedKeywords are not copied: definitions are inlined where used,
	// and identifiers would change how a consumer resolves the result.
	droppedKeywords = map[string]bool{
		"$defs": true, "definitions": true, "$id": true, "$schema": true,
		"$anchor": true, "$dynamicAnchor": true, "$vocabulary": true,
	}
)

func (st *state) spend(loc, file string) error {
	st.budget--
	if st.budget < 0 {
		return hint(resErr(file, loc, "schema expands to more than %d values once $refs are inlined", maxNodes), "structured-output schemas must be small; reduce repeated references")
	}
	return nil
}

// resolve returns a resolved copy of the schema node found at loc in file:
// refs inlined, allOf merged, definitions dropped.
func (st *state) resolve(file string, node any, loc string, depth int) (any, error) {
	if err := st.spend(loc, file); err != nil {
		return nil, err
	}
	if depth > maxDepth {
		return nil, resErr(file, loc, "schema nested deeper than %d levels", maxDepth)
	}
	switch x := node.(type) {
	case bool:
		return x, nil
	case *object:
		return st.resolveObject(file, x, loc, depth)
	default:
		return nil, hint(resErr(file, loc, "a schema must be an object or a boolean, not a %s", kindOf(node)), "check the JSON pointer or the keyword's value")
	}
}

func (st *state) resolveObject(file string, o *object, loc string, depth int) (any, error) {
	if refv, ok := o.get("$ref"); ok {
		return st.resolveWithRef(file, o, refv, loc, depth)
	}
	for _, k := range [...]string{"$dynamicRef", "$recursiveRef"} {
		if _, ok := o.get(k); ok {
			return nil, hint(resErr(file, loc+"/"+k, "%s is not supported: structured output needs a finite, self-contained schema", k), "use a $ref to a JSON pointer instead")
		}
	}
	out := newObject(o.len())
	for _, k := range o.keys {
		if droppedKeywords[k] {
			continue
		}
		rv, err := st.resolveKeyword(file, k, o.vals[k], loc+"/"+escapeToken(k), depth)
		if err != nil {
			return nil, err
		}
		out.set(k, rv)
	}
	if d := st.older[file]; d != nil {
		out = modernize(out, d)
	}
	if all, ok := out.get("allOf"); ok {
		// The object's own keywords are one more allOf member.
		members := append([]any(nil), all.([]any)...)
		return mergeAll(append(members, without(out, "allOf")), file, loc)
	}
	return out, nil
}

// resolveWithRef resolves a schema object with a $ref: the referenced
// schema, and the keywords next to $ref, which apply too (as one more
// allOf member after the referenced schema).
func (st *state) resolveWithRef(file string, o *object, refv any, loc string, depth int) (any, error) {
	ref, isStr := refv.(string)
	if !isStr {
		return nil, resErr(file, loc+"/$ref", "$ref must be a string")
	}
	target, err := st.resolveRef(file, ref, loc, depth)
	if err != nil {
		return nil, err
	}
	rest := without(o, "$ref")
	if !hasSchemaContent(rest) {
		return target, nil
	}
	siblings, err := st.resolveObject(file, rest, loc, depth)
	if err != nil {
		return nil, err
	}
	return mergeAll([]any{target, siblings}, file, loc)
}

// without is a copy of o without the keyword k.
func without(o *object, k string) *object {
	rest := newObject(o.len())
	for _, key := range o.keys {
		if key != k {
			rest.set(key, o.vals[key])
		}
	}
	return rest
}

// resolveKeyword resolves the value v of keyword k at kloc: a schema, a
// map or an array of schemas, draft-07's dependencies, or data (enum,
// const, default, ...), which is shared, never modified.
func (st *state) resolveKeyword(file, k string, v any, kloc string, depth int) (any, error) {
	switch {
	case schemaKeywords[k]:
		if arr, isArr := v.([]any); isArr && (k == "items" || k == "additionalItems") {
			return st.resolveArray(file, arr, kloc, depth)
		}
		return st.resolve(file, v, kloc, depth+1)
	case schemaMapKeywords[k]:
		m, ok := v.(*object)
		if !ok {
			return nil, resErr(file, kloc, "%s must be an object", k)
		}
		rm := newObject(m.len())
		for _, pk := range m.keys {
			rv, err := st.resolve(file, m.vals[pk], kloc+"/"+escapeToken(pk), depth+1)
			if err != nil {
				return nil, err
			}
			rm.set(pk, rv)
		}
		return rm, nil
	case schemaArrayKeywords[k]:
		a, ok := v.([]any)
		if !ok {
			return nil, resErr(file, kloc, "%s must be an array", k)
		}
		return st.resolveArray(file, a, kloc, depth)
	case k == "dependencies":
		// draft-07: values are schemas or arrays of property names.
		m, ok := v.(*object)
		if !ok {
			return nil, resErr(file, kloc, "dependencies must be an object")
		}
		rm := newObject(m.len())
		for _, pk := range m.keys {
			pv := m.vals[pk]
			if _, isArr := pv.([]any); isArr {
				rm.set(pk, pv)
				continue
			}
			rv, err := st.resolve(file, pv, kloc+"/"+escapeToken(pk), depth+1)
			if err != nil {
				return nil, err
			}
			rm.set(pk, rv)
		}
		return rm, nil
	}
	if err := st.spend(kloc, file); err != nil {
		return nil, err
	}
	return v, nil
}

func (st *state) resolveArray(file string, a []any, loc string, depth int) ([]any, error) {
	ra := make([]any, len(a))
	for i, e := range a {
		rv, err := st.resolve(file, e, loc+"/"+strconv.Itoa(i), depth+1)
		if err != nil {
			return nil, err
		}
		ra[i] = rv
	}
	return ra, nil
}

// hasSchemaContent reports whether o has keywords other than annotations
// and dropped identifiers (which would make a $ref sibling meaningless).
func hasSchemaContent(o *object) bool {
	for _, k := range o.keys {
		if !droppedKeywords[k] && k != "$comment" {
			return true
		}
	}
	return false
}

// resolveRef resolves the $ref ref found at loc in file.
func (st *state) resolveRef(file, ref, loc string, depth int) (any, error) {
	refLoc := loc + "/$ref"
	filePart, frag, _ := strings.Cut(ref, "#")
	if strings.Contains(filePart, ":") {
		return nil, hint(resErr(file, refLoc, "$ref %q is not a relative file reference; only refs to files in the schema directory are resolved", ref), "copy the schema into the schema directory and refer to it by relative path")
	}
	target := file
	if filePart != "" {
		unescaped, err := url.PathUnescape(filePart)
		if err != nil {
			unescaped = filePart
		}
		t, err := cleanRel(path.Dir(file), unescaped)
		if err != nil {
			return nil, hint(resErr(file, refLoc, "$ref %q leads outside the schema directory", ref), "refer to files inside the schema directory")
		}
		target = t
	}
	ptr, err := url.PathUnescape(frag)
	if err != nil {
		ptr = frag
	}
	if ptr != "" && ptr[0] != '/' {
		return nil, hint(resErr(file, refLoc, "$ref %q uses an anchor; only JSON-pointer fragments (#/...) are supported", ref), "refer to the definition by pointer, e.g. #/$defs/name")
	}
	root, err := st.r.load(target)
	if err != nil {
		if e := agenterr.From(err); e != nil && target != file {
			return nil, wrap(hint(resErr(file, refLoc, "$ref %q: %s", ref, e.Message), e.Hint), err)
		}
		return nil, err
	}
	if target != file {
		if err := st.noteDraft(target, root); err != nil {
			return nil, err
		}
	}
	node, err := resolvePointer(root, ptr)
	if err != nil {
		return nil, hint(resErr(file, refLoc, "dangling $ref %q: %s#%s does not exist (%v)", ref, target, ptr, err), "add the definition or fix the reference")
	}
	key := refKey(target, ptr)
	for i, k := range st.stack {
		if k == key {
			cycle := append(append([]string(nil), st.stack[i:]...), key)
			return nil, hint(resErr(file, refLoc, "cyclic $ref: %s", strings.Join(cycle, " → ")), "structured output needs a finite schema: replace the recursion with a fixed depth")
		}
	}
	if st.visit != nil {
		st.visit(target, ptr, node)
	}
	st.stack = append(st.stack, key)
	out, err := st.resolve(target, node, ptr, depth+1)
	st.stack = st.stack[:len(st.stack)-1]
	return out, err
}

// isObjectSchema reports whether s describes objects.
func isObjectSchema(s *object) bool {
	if t, ok := s.get("type"); ok {
		switch x := t.(type) {
		case string:
			return x == "object"
		case []any:
			for _, e := range x {
				if e == "object" {
					return true
				}
			}
		}
		return false
	}
	_, hasProps := s.get("properties")
	return hasProps
}

// addAdditionalProperties adds additionalProperties:false to every object
// schema in the resolved tree v that sets neither additionalProperties nor
// unevaluatedProperties. Conditional and negated subschemas (if, then,
// else, not, dependentSchemas) are left alone: they describe a part of the
// instance, not its whole shape, so closing them would change what they
// mean (an "if" naming one property would never match an answer that has
// others, and its "then" would never be enforced).
func addAdditionalProperties(v any, depth int) {
	s, ok := v.(*object)
	if !ok || depth > 2*maxDepth {
		return
	}
	for _, k := range s.keys {
		sub := s.vals[k]
		switch {
		case partialKeywords[k]:
			continue
		case schemaKeywords[k]:
			if a, isArr := sub.([]any); isArr {
				for _, e := range a {
					addAdditionalProperties(e, depth+1)
				}
				continue
			}
			addAdditionalProperties(sub, depth+1)
		case schemaMapKeywords[k], k == "dependencies":
			if m, ok := sub.(*object); ok {
				for _, pk := range m.keys {
					addAdditionalProperties(m.vals[pk], depth+1)
				}
			}
		case schemaArrayKeywords[k]:
			if a, ok := sub.([]any); ok {
				for _, e := range a {
					addAdditionalProperties(e, depth+1)
				}
			}
		}
	}
	if isObjectSchema(s) {
		_, hasAP := s.get("additionalProperties")
		_, hasUP := s.get("unevaluatedProperties")
		if !hasAP && !hasUP {
			s.set("additionalProperties", false)
		}
	}
}

// resErr returns a SCHEMA_RESOLUTION error about the JSON pointer ptr in
// file.
func resErr(file, ptr, format string, args ...any) *agenterr.Error {
	return &agenterr.Error{
		Code: agenterr.CodeSchemaResolution, Layer: agenterr.LayerCompletion,
		Message: fmt.Sprintf(format, args...), File: file, Pointer: ptr,
	}
}

// hint sets e's hint and returns e.
func hint(e *agenterr.Error, h string) *agenterr.Error { e.Hint = h; return e }

// wrap sets e's cause and returns e.
func wrap(e *agenterr.Error, err error) *agenterr.Error { e.Err = err; return e }
