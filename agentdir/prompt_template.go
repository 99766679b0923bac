package agentdir

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/goccy/go-yaml"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
)

// varPrefix opens a prompt variable placeholder: {uv-name}.
const varPrefix = "{uv-"

// maxFrontmatterNodes bounds the size of a frontmatter value once YAML
// aliases are expanded, so that an alias bomb cannot make a consumer that
// walks or encodes the map (the journal, a JSON dump) run out of memory.
const maxFrontmatterNodes = 100_000

// segment is one piece of a parsed template body: literal text, or a
// variable placeholder when name is non-empty. For a placeholder, lit holds
// it as written ("{uv-name}") so it can be left in place when the variable
// is not defined.
type promptSegment struct {
	lit  string
	name string
}

// template is a parsed prompt file: its frontmatter and its body split into
// literal and placeholder segments, so that rendering is a single pass that
// never re-scans substituted values.
type promptTemplate struct {
	frontmatter map[string]any
	body        string
	segs        []promptSegment
	vars        []string // distinct variable names, in order of first use
	litLen      int      // total length of the literal segments
	// last is the text the template rendered last with every variable
	// defined: the agents of one definition render its prompts alike, and
	// a render that comes out the same returns it instead of a new copy
	// that each agent would keep.
	last atomic.Pointer[string]
}

// isVarNameByte reports whether c may appear in a variable name
// ([a-zA-Z0-9_-]).
func isVarNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// scanVar reports whether s begins with a well-formed placeholder
// "{uv-name}" and, if so, returns the name and the placeholder's length.
func scanVar(s string) (name string, n int, ok bool) {
	if !strings.HasPrefix(s, varPrefix) {
		return "", 0, false
	}
	i := len(varPrefix)
	for i < len(s) && isVarNameByte(s[i]) {
		i++
	}
	if i == len(varPrefix) || i >= len(s) || s[i] != '}' {
		return "", 0, false
	}
	return s[len(varPrefix):i], i + 1, true
}

// splitSegments splits body into literal and placeholder segments.
// Malformed placeholders ("{uv-" without a closing brace, "{uv-}" or a name
// with characters outside [a-zA-Z0-9_-]) are literal text.
func splitSegments(body string) (segs []promptSegment, vars []string, litLen int) {
	start := 0 // start of the pending literal
	i := 0
	for {
		j := strings.Index(body[i:], varPrefix)
		if j < 0 {
			break
		}
		i += j
		name, n, ok := scanVar(body[i:])
		if !ok {
			i += len(varPrefix)
			continue
		}
		if i > start {
			segs = append(segs, promptSegment{lit: body[start:i]})
			litLen += i - start
		}
		segs = append(segs, promptSegment{lit: body[i : i+n], name: name})
		if !containsString(vars, name) {
			vars = append(vars, name)
		}
		i += n
		start = i
	}
	if start < len(body) {
		segs = append(segs, promptSegment{lit: body[start:]})
		litLen += len(body) - start
	}
	return segs, vars, litLen
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Variables lists the names of the {uv-name} placeholders used in text, in
// order of first use and without duplicates. The names are returned without
// the "uv-" prefix, the form in which variables are passed to
// [Resolver.Resolve]. Malformed placeholders are not listed.
func TemplateVariables(text string) []string {
	_, vars, _ := splitSegments(text)
	return vars
}

// Substitute replaces every well-formed {uv-name} placeholder in text whose
// name is a key of vars with its value, in a single left-to-right pass:
// substituted values are never scanned again, so a value containing
// "{uv-other}" is inserted literally. Placeholders of undefined variables are
// left as written; their names are returned in undefined (distinct, in order
// of first use).
func SubstituteVariables(text string, vars map[string]string) (out string, undefined []string) {
	segs, _, litLen := splitSegments(text)
	t := &promptTemplate{body: text, segs: segs, litLen: litLen}
	return t.render(vars)
}

// render substitutes vars into the template in one pass.
func (t *promptTemplate) render(vars map[string]string) (string, []string) {
	if len(t.segs) == 1 && t.segs[0].name == "" {
		return t.segs[0].lit, nil
	}
	size, defined := t.litLen, true
	for _, s := range t.segs {
		if s.name == "" {
			continue
		}
		if v, ok := vars[s.name]; ok {
			size += len(v)
		} else {
			size += len(s.lit)
			defined = false
		}
	}
	if last := t.last.Load(); defined && last != nil && len(*last) == size && t.rendersAs(*last, vars) {
		return *last, nil
	}
	var b strings.Builder
	b.Grow(size)
	var undefined []string
	for _, s := range t.segs {
		if s.name == "" {
			b.WriteString(s.lit)
			continue
		}
		if v, ok := vars[s.name]; ok {
			b.WriteString(v)
			continue
		}
		b.WriteString(s.lit)
		if !containsString(undefined, s.name) {
			undefined = append(undefined, s.name)
		}
	}
	out := b.String()
	if defined {
		t.last.Store(&out)
	}
	return out, undefined
}

// rendersAs reports whether the template renders as text with vars, every
// one of which is defined.
func (t *promptTemplate) rendersAs(text string, vars map[string]string) bool {
	for _, s := range t.segs {
		v := s.lit
		if s.name != "" {
			v = vars[s.name]
		}
		if !strings.HasPrefix(text, v) {
			return false
		}
		text = text[len(v):]
	}
	return text == ""
}

// parseTemplate parses a prompt file's content: optional YAML frontmatter
// delimited by "---" lines at the very start of the file, then the body.
// file names the file in errors (relative to the agent dir).
func parsePromptTemplate(data []byte, file string) (*promptTemplate, error) {
	if !utf8.Valid(data) {
		return nil, &agenterr.Error{
			Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
			Message: "prompt file is not valid UTF-8", File: file,
			Hint: "save the prompt as UTF-8 text",
		}
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	fm, body, err := splitPromptFrontmatter(data, file)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(body) == "" {
		return nil, &agenterr.Error{
			Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
			Message: "prompt body is empty", File: file,
			Hint: "write the prompt text after the frontmatter; an empty prompt is never sent to a model",
		}
	}
	t := &promptTemplate{frontmatter: fm, body: body}
	t.segs, t.vars, t.litLen = splitSegments(body)
	return t, nil
}

// splitPromptFrontmatter separates YAML frontmatter from the body by the
// rule of yamlsafe.SplitFrontmatter. A file that opens frontmatter but never
// closes it is an error, not a body: silently sending YAML to a model
// hides the mistake.
func splitPromptFrontmatter(data []byte, file string) (map[string]any, string, error) {
	b, err := yamlsafe.SplitFrontmatter(string(data))
	if err != nil {
		return nil, "", &agenterr.Error{
			Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
			Message: "unterminated frontmatter: the file starts with \"---\" but no closing \"---\" line follows",
			File:    file, Line: 1, Column: 1,
			Hint: "close the frontmatter with a line containing only \"---\", or remove the opening \"---\" line",
		}
	}
	if !b.Present {
		return nil, b.Body, nil
	}
	fm, err := decodeFrontmatter(b.YAML, file)
	if err != nil {
		return nil, "", err
	}
	return fm, b.Body, nil
}

// decodeFrontmatter parses the YAML between the frontmatter delimiters.
// Positions in errors are reported in file coordinates (the YAML starts on
// line 2).
func decodeFrontmatter(src, file string) (map[string]any, error) {
	fm := map[string]any{}
	if strings.TrimSpace(src) == "" {
		return fm, nil
	}
	var v any
	if err := yamlsafe.Unmarshal([]byte(src), &v); err != nil {
		e := &agenterr.Error{
			Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
			Message: "invalid YAML frontmatter", File: file, Err: err,
			Hint: "fix the YAML between the \"---\" lines",
		}
		var ye yaml.Error
		if errors.As(err, &ye) {
			e.Err = errors.New(ye.GetMessage())
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				e.Line = tk.Position.Line + 1
				e.Column = tk.Position.Column
			}
		}
		if e.Line == 0 {
			e.Line = 2
		}
		return nil, e
	}
	if v == nil {
		return fm, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &agenterr.Error{
			Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
			Message: fmt.Sprintf("frontmatter must be a YAML mapping, got %s", yamlKind(v)),
			File:    file, Line: 2, Column: 1,
			Hint: "write the frontmatter as key: value lines",
		}
	}
	budget := maxFrontmatterNodes
	if !withinBudget(m, &budget) {
		return nil, &agenterr.Error{
			Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
			Message: fmt.Sprintf("frontmatter expands to more than %d values (YAML aliases)", maxFrontmatterNodes),
			File:    file, Line: 2, Column: 1,
			Hint: "remove the anchors and aliases that multiply the frontmatter",
		}
	}
	return m, nil
}

// withinBudget walks v (expanding shared values as a consumer would) and
// reports whether it has at most *budget nodes.
func withinBudget(v any, budget *int) bool {
	*budget--
	if *budget < 0 {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !withinBudget(e, budget) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !withinBudget(e, budget) {
				return false
			}
		}
	}
	return true
}

func yamlKind(v any) string {
	switch v.(type) {
	case []any:
		return "a sequence"
	case string:
		return "a string"
	case map[any]any:
		return "a mapping with non-string keys"
	default:
		return fmt.Sprintf("a %T", v)
	}
}
