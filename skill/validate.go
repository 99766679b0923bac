package skill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
	"github.com/capstan-dev/capstan/sandbox"
	jschema "github.com/capstan-dev/capstan/schema"
)

// Expected is one entry of expectedOutputs: a file the run must produce
// under build/, optionally checked against a JSON Schema and rules.
type Expected struct {
	// Path is relative to the build directory ("report.json").
	Path string `json:"path"`
	// Schema is a JSON Schema file relative to the skill root. JSON and
	// YAML outputs are validated against it.
	Schema string `json:"schema,omitempty"`
	// Rules are extra checks.
	Rules *Rules `json:"rules,omitempty"`
}

// Rules are simple content checks (the "rules" form of the validate tool).
type Rules struct {
	// NonEmpty requires at least one non-whitespace byte (always on for
	// expected outputs).
	NonEmpty bool `json:"non_empty,omitempty"`
	// Contains lists strings that must appear.
	Contains []string `json:"contains,omitempty"`
	// NotContains lists strings that must not appear.
	NotContains []string `json:"not_contains,omitempty"`
	// Matches is a regular expression (RE2) the content must match.
	Matches string `json:"matches,omitempty"`
	// JSON requires the content to be valid JSON.
	JSON bool `json:"json,omitempty"`
	// MaxBytes bounds the size.
	MaxBytes int `json:"max_bytes,omitempty"`
}

// OutputCheck is the verdict on one expected output, along three gates:
// completeness (it exists), compliance (schema, placement, naming) and
// quality (content).
type OutputCheck struct {
	Path         string   `json:"path"`
	Completeness bool     `json:"completeness"` // the file exists
	Compliance   bool     `json:"compliance"`   // schema / placement / naming
	Quality      bool     `json:"quality"`      // non-empty, parses, no leftover placeholders, rules
	Errors       []string `json:"errors,omitempty"`
}

// OK reports whether every gate passed.
func (o OutputCheck) OK() bool { return o.Completeness && o.Compliance && o.Quality }

// Validation is the verdict on all expected outputs.
type Validation struct {
	OK      bool          `json:"ok"`
	Outputs []OutputCheck `json:"outputs"`
}

// placeholderRe finds template leftovers that mean an output is unfinished.
var placeholderRe = lazyre.New(`\{\{[^}]*\}\}|<no value>`)

// checkOutput validates one expected output file.
func checkOutput(schemas *jschema.Cache, skillRoot, build string, e Expected) OutputCheck {
	oc := OutputCheck{Path: e.Path}
	p, err := sandbox.ResolveInside(build, e.Path)
	if err != nil {
		oc.Errors = append(oc.Errors, "placement: "+err.Error())
		return oc
	}
	data, err := readRegular(p)
	if errors.Is(err, fs.ErrNotExist) {
		oc.Errors = append(oc.Errors, "missing: build/"+e.Path+" does not exist")
		return oc
	}
	if err != nil {
		oc.Errors = append(oc.Errors, "unreadable: build/"+e.Path+": "+err.Error())
		return oc
	}
	oc.Completeness = true
	oc.Compliance = true
	if e.Schema != "" {
		if errs := validateAgainstSchema(schemas, skillRoot, e.Schema, p, data); len(errs) > 0 {
			oc.Compliance = false
			oc.Errors = append(oc.Errors, errs...)
		}
	}
	oc.Quality = true
	rules := Rules{NonEmpty: true}
	if e.Rules != nil {
		rules = *e.Rules
		rules.NonEmpty = true
	}
	if strings.HasSuffix(strings.ToLower(p), ".json") {
		rules.JSON = true
	}
	if errs := checkRules(data, rules); len(errs) > 0 {
		oc.Quality = false
		oc.Errors = append(oc.Errors, errs...)
	}
	if m := placeholderRe().Find(data); m != nil {
		oc.Quality = false
		oc.Errors = append(oc.Errors, fmt.Sprintf("quality: unfinished placeholder %q left in the output", m))
	}
	return oc
}

// checkRules applies rules to data and returns the violations.
func checkRules(data []byte, r Rules) []string {
	var errs []string
	if r.NonEmpty && len(bytes.TrimSpace(data)) == 0 {
		errs = append(errs, "quality: the content is empty")
	}
	if r.JSON && !json.Valid(data) {
		errs = append(errs, "quality: the content is not valid JSON")
	}
	if r.MaxBytes > 0 && len(data) > r.MaxBytes {
		errs = append(errs, fmt.Sprintf("quality: %d bytes exceed the limit of %d", len(data), r.MaxBytes))
	}
	for _, c := range r.Contains {
		if !bytes.Contains(data, []byte(c)) {
			errs = append(errs, fmt.Sprintf("quality: %q is missing", c))
		}
	}
	for _, c := range r.NotContains {
		if c != "" && bytes.Contains(data, []byte(c)) {
			errs = append(errs, fmt.Sprintf("quality: %q must not appear", c))
		}
	}
	if r.Matches != "" {
		re, err := regexp.Compile(r.Matches)
		if err != nil {
			errs = append(errs, "rules: bad regular expression: "+err.Error())
		} else if !re.Match(data) {
			errs = append(errs, fmt.Sprintf("quality: the content does not match %q", r.Matches))
		}
	}
	return errs
}

// decodeDoc decodes JSON (or YAML for .yaml/.yml names) into a value the
// schema validator accepts.
func decodeDoc(name string, data []byte) (any, error) {
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, ".yaml") || strings.HasSuffix(lower, ".yml") {
		var v any
		if err := yamlsafe.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		// Round-trip through JSON so numbers and maps have JSON types.
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		data = b
	}
	return jschema.Decode(data)
}

// rootLoader loads schema files only from inside the skill root, so a
// schema's $ref cannot read other files.
type rootLoader struct{ root string }

// Load reads a file:// schema URL inside the skill root.
func (l rootLoader) Load(u string) ([]byte, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "file" {
		return nil, fmt.Errorf("schema reference %q: only files inside the skill are allowed", u)
	}
	p := filepath.FromSlash(pu.Path)
	rel, err := filepath.Rel(l.root, p)
	if err != nil {
		return nil, err
	}
	full, err := sandbox.ResolveInside(l.root, rel)
	if err != nil {
		return nil, err
	}
	return readRegular(full)
}

// compileSchema compiles a schema file of the skill through schemas,
// which reads it (and the files it refers to) again on every call.
func compileSchema(schemas *jschema.Cache, skillRoot, schemaRel string) (*jschema.Schema, error) {
	p, err := sandbox.ResolveInside(skillRoot, schemaRel)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(p); err != nil {
		e := agenterr.New(agenterr.CodeSkillMissingReference, agenterr.LayerSkill, true, "schema %q does not exist in the skill", schemaRel)
		e.Hint = "list the skill's files; schemas are usually *.schema.json"
		return nil, e
	}
	return schemas.Compile(jschema.Source{URL: "file://" + filepath.ToSlash(p), Loader: rootLoader{root: skillRoot}.Load})
}

// validateAgainstSchema returns the schema violations of data (file name
// used to choose JSON or YAML).
func validateAgainstSchema(schemas *jschema.Cache, skillRoot, schemaRel, name string, data []byte) []string {
	sch, err := compileSchema(schemas, skillRoot, schemaRel)
	if err != nil {
		return []string{"schema: " + err.Error()}
	}
	doc, err := decodeDoc(name, data)
	if err != nil {
		return []string{"compliance: not parseable: " + err.Error()}
	}
	return schemaErrors(sch, doc)
}

// schemaErrors lists doc's schema violations, at most 20.
func schemaErrors(sch *jschema.Schema, doc any) []string {
	err := sch.Check(doc)
	if err == nil {
		return nil
	}
	problems := jschema.Problems(err)
	if len(problems) == 0 {
		return []string{"compliance: " + err.Error()}
	}
	out := make([]string, 0, min(len(problems), 20))
	for _, p := range problems[:min(len(problems), 20)] {
		out = append(out, "compliance: "+p)
	}
	return out
}
