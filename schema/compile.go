package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonschema"
)

// schemaURL is the location under which a compiled schema is registered;
// it is never fetched.
const schemaURL = "capstan:///schema.json"

// Source is a JSON Schema document to compile with [CompileSource].
type Source struct {
	// Raw is the document. When nil, the document at URL is read through
	// Loader.
	Raw []byte
	// URL names the document and is the base of its relative references
	// ("" = an internal name that is never fetched).
	URL string
	// Loader reads the file: documents that references point at (and the
	// document itself when Raw is nil). Nil means none is read: a
	// reference to another document is an error. Documents at other URL
	// schemes (http, https, ...) are never read.
	Loader func(url string) ([]byte, error)
	// Builtin marks one of capstan's own embedded schemas: it is not
	// checked against its meta-schema at run time (its tests do that).
	// Every schema a user writes is checked.
	Builtin bool
	// Subset, for a Builtin schema, is Raw compiled ahead of time for
	// the subset validator ([CompileSubset]): the schema is then checked
	// by it, and Raw is not compiled (Raw is decoded
	// only to word failures).
	Subset *SubsetTable
	// assertFormat asserts "format" whatever the draft: a schema that
	// [Resolver.Compile] rewrote into 2020-12 from files of draft 4 to 7,
	// which assert it.
	assertFormat bool
}

// SourceError is a failure of [CompileSource]: Stage is "json" (the
// document is not JSON), "load" (it cannot be read) or "compile" (it is
// not a valid schema, or a reference cannot be resolved).
type SourceError struct {
	Stage string
	URL   string
	Err   error
}

func (e *SourceError) Error() string {
	switch e.Stage {
	case "json":
		return fmt.Sprintf("schema %s is not JSON: %v", e.URL, e.Err)
	default:
		return fmt.Sprintf("schema %s: %v", e.URL, e.Err)
	}
}

// Unwrap returns the underlying error.
func (e *SourceError) Unwrap() error { return e.Err }

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	// Exactly one of sch (compiled by the library) and sub (by
	// CompileSubset's table) is set; subsetEngine decides which.
	sch *jsonschema.Schema
	sub *subsetSchema
	// mu serializes validations: the library caches a compiled pattern in
	// the schema the first time it is used, without a lock.
	mu  sync.Mutex
	raw []byte
	// doc is raw decoded, to find the schema object behind each failure
	// (its description, its property names); decoded when first needed.
	docOnce sync.Once
	doc     any
	docErr  error
}

// document returns the decoded schema document.
func (s *Schema) document() (any, error) {
	s.docOnce.Do(func() { s.doc, s.docErr = Decode(s.raw) })
	return s.doc, s.docErr
}

// CompileSource is capstan's one way to compile a JSON Schema: every
// package that validates against a schema (configuration files, skill
// schemas, pipeline contracts, provider output checks, [Compile]) calls
// it, so the default draft (2020-12), the check of the document against
// its draft's meta-schema, the refusal to read referenced documents unless
// a Loader is given, and the errors are the same everywhere.
//
// $schema selects draft 4, 6, 7, 2019-09 or 2020-12; "format" is asserted
// for drafts 4 to 7 and is an annotation for 2019-09 and 2020-12, as those
// drafts define it.
func CompileSource(src Source) (*Schema, error) {
	u := src.URL
	if u == "" {
		u = schemaURL
	}
	raw, err := sourceDocument(src, u)
	if err != nil {
		return nil, err
	}
	sch := &Schema{raw: raw}
	if sub, err := subsetEngine(src); err != nil {
		return nil, &SourceError{Stage: "compile", URL: u, Err: err}
	} else if sub != nil {
		sch.sub = sub
		return sch, nil
	}
	d, err := sch.checkedDraft(src.Builtin, u)
	if err != nil {
		return nil, err
	}
	assertFormat := d.assertsFormat || src.assertFormat
	c := newCompiler(assertFormat)
	formats := unknownFormats{c: c}
	if assertFormat {
		doc, err := sch.document()
		if err != nil {
			return nil, &SourceError{Stage: "json", URL: u, Err: err}
		}
		formats.register(doc)
	}
	compileURL := u
	var loadErr error // the first document a reference could not have
	if src.Loader != nil {
		compileURL = withLocalhost(u)
		registerFileLoader(c, src, u, assertFormat, formats, &loadErr)
	}
	var compiled *jsonschema.Schema
	if src.Builtin {
		// The batch compiler resolves references once for the whole
		// document and skips the library's check of every pattern's
		// syntax, which capstan's tests do for its own schemas.
		var batch map[string]*jsonschema.Schema
		if batch, err = c.CompileBatch(map[string][]byte{compileURL: raw}); err == nil {
			compiled = batch[compileURL]
		}
	} else {
		compiled, err = c.Compile(raw, compileURL)
	}
	if err != nil {
		if fails := patternProblems(err); len(fails) > 0 {
			err = newMetaError(d, fails)
		}
		return nil, &SourceError{Stage: "compile", URL: u, Err: err}
	}
	sch.sch = compiled
	// The library leaves a reference it cannot resolve unresolved (and
	// then skips it when validating), and does not always list it (a
	// $dynamicRef, a cycle): a schema that names what cannot be read is
	// refused here instead.
	if refs := compiled.UnresolvedReferenceURIs(); len(refs) > 0 {
		msg := fmt.Sprintf("reference %q cannot be resolved", refs[0])
		if loadErr != nil {
			msg += ": " + loadErr.Error()
		}
		if src.Loader == nil {
			return nil, &SourceError{Stage: "compile", URL: u, Err: &externalRefError{ref: refs[0]}}
		}
		return nil, &SourceError{Stage: "compile", URL: u, Err: errors.New(msg)}
	}
	if loadErr != nil {
		return nil, &SourceError{Stage: "compile", URL: u, Err: fmt.Errorf("a reference cannot be resolved: %w", loadErr)}
	}
	return sch, nil
}

// sourceDocument is the schema document of src: its Raw bytes, or what its
// Loader reads at u.
func sourceDocument(src Source, u string) ([]byte, error) {
	raw := src.Raw
	if raw == nil {
		if src.Loader == nil {
			return nil, &SourceError{Stage: "load", URL: u, Err: errors.New("no document and no loader")}
		}
		b, err := src.Loader(u)
		if err != nil {
			return nil, &SourceError{Stage: "load", URL: u, Err: err}
		}
		return b, nil
	}
	return raw, nil
}

// checkedDraft is the draft of the document; a document that is not
// builtin (tested) JSON is checked first: JSON, numbers, its meta-schema.
func (sch *Schema) checkedDraft(builtin bool, u string) (*draft, error) {
	var d *draft
	if builtin {
		// Tested JSON: read only as far as $schema.
		var err error
		if d, err = headerDraft(sch.raw); err != nil {
			return nil, &SourceError{Stage: "compile", URL: u, Err: err}
		}
	} else {
		doc, err := sch.document()
		if err != nil {
			return nil, &SourceError{Stage: "json", URL: u, Err: err}
		}
		if d, err = draftOf(doc); err != nil {
			return nil, &SourceError{Stage: "compile", URL: u, Err: err}
		}
		if err := checkNumbers(doc); err != nil {
			return nil, &SourceError{Stage: "compile", URL: u, Err: err}
		}
		if err := checkSchema(d, doc); err != nil {
			return nil, &SourceError{Stage: "compile", URL: u, Err: err}
		}
	}
	return d, nil
}

// registerFileLoader lets the compiler read the documents references name
// through src's Loader, refusing a document asked for again while it is
// being compiled; the first document that cannot be read is kept in loadErr.
func registerFileLoader(c *jsonschema.Compiler, src Source, u string, assertFormat bool, formats unknownFormats, loadErr *error) {
	// The library keeps a document once compiled and asks for it
	// again only while still compiling it: documents that refer to
	// each other in a cycle, which it would follow without end.
	requested := map[string]bool{withoutLocalhost(u): true}
	c.RegisterLoader("file", func(ref string) (io.ReadCloser, error) {
		name := withoutLocalhost(stripFragment(ref))
		var b []byte
		var err error
		if requested[name] {
			err = fmt.Errorf("%s is referred to again while it is being compiled (documents that refer to each other in a cycle); put the schemas that refer to each other in one document under $defs", name)
		} else {
			requested[name] = true
			b, err = loadChecked(src, name, assertFormat, formats)
		}
		if err != nil {
			if *loadErr == nil {
				*loadErr = err
			}
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}

// subsetEngine returns the subset validator for src, or nil when the
// library compiles src. The subset validator runs only for a built-in
// schema handed with its table (Source.Subset): capstan's configuration
// schemas, which every `capstan validate` and `capstan run` checks, and
// whose tables go generate writes ([CompileSubset] refuses a schema that
// uses a keyword it does not implement). Compiling them with the library,
// which decodes every schema object by reflection, took more time than
// all the rest of checking an agent folder. Every schema a user writes is
// compiled by the library, and so is a built-in schema without a table:
// the library's verdict stays the reference, against which the
// configuration tests hold the subset validator failure by failure.
func subsetEngine(src Source) (*subsetSchema, error) {
	if src.Subset == nil {
		return nil, nil
	}
	if !src.Builtin {
		return nil, errors.New("a subset table is only used for a built-in schema")
	}
	if err := src.Subset.check(); err != nil {
		return nil, fmt.Errorf("subset table: %w", err)
	}
	return newSubsetSchema(src.Subset), nil
}

// patternProblems returns one Failure per invalid regular expression the
// library's err reports (none when it reports none), worded and located as
// the meta-schema's problems. (checkSchema finds them first in a schema a
// user writes; a built-in schema reaches this.)
func patternProblems(err error) []Failure {
	var out []Failure
	var walk func(error)
	walk = func(e error) {
		if re, ok := e.(*jsonschema.RegexPatternError); ok {
			var loc []string
			if ptr := strings.TrimPrefix(re.Location, "#"); ptr != "" {
				for _, t := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
					loc = append(loc, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
				}
			}
			out = append(out, Failure{Keyword: re.Keyword, Message: patternMessage(re.Pattern, re.Err), Instance: loc, Value: re.Pattern})
			return
		}
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return out
}

// externalRefError is a reference to another document in a schema
// compiled without a loader.
type externalRefError struct{ ref string }

func (e *externalRefError) Error() string {
	return fmt.Sprintf("references to other documents are not loaded (%s); make the schema self-contained", e.ref)
}

// loadChecked reads the document a reference names through src.Loader
// and checks it like the document that names it.
func loadChecked(src Source, name string, assertsFormat bool, formats unknownFormats) ([]byte, error) {
	b, err := src.Loader(name)
	if err != nil {
		return nil, err
	}
	doc, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s is not JSON: %w", name, err)
	}
	if !src.Builtin {
		d, err := draftOf(doc)
		if err == nil {
			err = checkNumbers(doc)
		}
		if err == nil {
			err = checkSchema(d, doc)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if assertsFormat {
		formats.register(doc)
	}
	return b, nil
}

// The library resolves a relative reference only against a base URL that
// has a host, which file:///path URLs lack; while compiling, a document
// read through a loader is named file://localhost/path (the same file) and
// the loader is handed file:///path again.
func withLocalhost(u string) string {
	if rest, ok := strings.CutPrefix(u, "file:///"); ok {
		return "file://localhost/" + rest
	}
	return u
}

func withoutLocalhost(u string) string {
	if rest, ok := strings.CutPrefix(u, "file://localhost/"); ok {
		return "file:///" + rest
	}
	return u
}

// newCompiler returns a library compiler that reads nothing: the library
// registers network loaders by default, and capstan never fetches a schema.
func newCompiler(assertFormat bool) *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	for scheme := range c.Loaders {
		delete(c.Loaders, scheme)
	}
	c.SetAssertFormat(assertFormat)
	return c
}

// unknownFormats makes a format the library does not know pass: an
// asserted format the library has no check for would otherwise fail every
// value, where the drafts say an unknown format is ignored.
type unknownFormats struct{ c *jsonschema.Compiler }

func (u unknownFormats) register(doc any) {
	walkJSON(doc, 0, func(m map[string]any) {
		name, ok := m["format"].(string)
		if !ok {
			return
		}
		if _, known := jsonschema.Formats[name]; !known {
			u.c.RegisterFormat(name, func(any) bool { return true })
		}
	})
}

// walkJSON calls fn for every object in v.
func walkJSON(v any, depth int, fn func(map[string]any)) {
	if depth > maxDepth {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		for _, e := range x {
			walkJSON(e, depth+1, fn)
		}
	case []any:
		for _, e := range x {
			walkJSON(e, depth+1, fn)
		}
	}
}

func stripFragment(ref string) string {
	base, _, _ := strings.Cut(ref, "#")
	return base
}

// Decode decodes one JSON value into the generic form schemas validate:
// objects as map[string]any, arrays as []any, numbers as json.Number (so
// large integers keep their value). Text after the value is an error.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}
