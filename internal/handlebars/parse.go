// Package handlebars renders the Handlebars subset capstan documents for
// retry prompts and pipeline prompts: {{path}}, {{a.b}}, {{this}},
// {{../x}}, {{@index}} {{@key}} {{@first}} {{@last}} {{@root.x}},
// {{#if}}/{{#unless}}/{{#each}}/{{#with}} with {{else}} (and {{else if x}}),
// {{lookup x "k"}}, value helpers registered by the caller ({{json x}}),
// comments, "~" whitespace control, standalone-line removal and \{{
// escapes. Output is never HTML-escaped.
//
// Templates may come from a model (a skill, an agent written by an agent),
// so rendering is bounded: a step budget, an output cap and context
// cancellation checked inside every loop. Data is walked as JSON-shaped
// values (maps, slices, strings, numbers, bools); nothing is looked up by
// reflection, which keeps the linker's dead-method elimination on for
// every binary that embeds capstan.
package handlebars

import (
	"fmt"
	"strconv"
	"strings"
)

// SyntaxError is a template that cannot be parsed, with the 1-based line
// and column of the offending tag.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

// Error implements error as "line L:C: message".
func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d:%d: %s", e.Line, e.Col, e.Msg) }

// Helper renders one value as text, e.g. {{json x}}.
type Helper func(v any) string

// Template is a parsed template, safe for concurrent Render calls.
type Template struct {
	body    []node
	helpers map[string]Helper
}

// Block helpers the renderer knows.
const (
	blockIf     = "if"
	blockUnless = "unless"
	blockEach   = "each"
	blockWith   = "with"
	helperLook  = "lookup"
)

type node interface{}

type textNode struct{ s string }

// pathExpr is a value reference: parent depth (../), a data variable
// (@index, @root.x), and the parts after it ("this" removed).
type pathExpr struct {
	depth int
	data  bool
	this  bool // starts with this or ./ — never a top-level name
	parts []string
}

// literal is a string, number or boolean argument.
type literal struct{ v any }

// mustache prints a value, optionally through a helper.
type mustache struct {
	helper string // "" = print args[0]
	args   []any  // pathExpr or literal
	line   int
	col    int
}

// block is {{#name arg}}body{{else}}inverse{{/name}}.
type block struct {
	name    string
	arg     any
	body    []node
	inverse []node
}

type tagKind int

const (
	tagText tagKind = iota
	tagMustache
	tagOpen
	tagClose
	tagElse
	tagComment
)

type token struct {
	kind       tagKind
	text       string // text, or the tag's inner expression
	line, col  int
	stripLeft  bool
	stripRight bool
	inverted   bool // {{^x}}
}

// Parse parses src. helpers are the value helpers the template may call
// besides lookup; an unknown helper, an unclosed block or an unsupported
// construct (partials, raw blocks, hash arguments) is a *SyntaxError.
func Parse(src string, helpers map[string]Helper) (*Template, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	stripWhitespace(toks)
	p := &parser{toks: toks, helpers: helpers}
	body, end, err := p.parseUntil(nil)
	if err != nil {
		return nil, err
	}
	if end != nil {
		return nil, &SyntaxError{end.line, end.col, "unexpected {{" + tagWord(end) + "}} outside a block"}
	}
	return &Template{body: body, helpers: helpers}, nil
}

func tagWord(t *token) string {
	switch t.kind {
	case tagClose:
		return "/" + t.text
	case tagElse:
		return "else"
	}
	return t.text
}

// lex splits src into text and tag tokens.
func lex(src string) ([]token, error) {
	var toks []token
	line, col := 1, 1
	advance := func(s string) {
		for _, r := range s {
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
	}
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			toks = append(toks, token{kind: tagText, text: text.String()})
			text.Reset()
		}
	}
	for len(src) > 0 {
		i := strings.Index(src, "{{")
		if i < 0 {
			text.WriteString(src)
			break
		}
		if i > 0 && src[i-1] == '\\' {
			// \{{ is a literal "{{".
			text.WriteString(src[:i-1])
			text.WriteString("{{")
			advance(src[:i+2])
			src = src[i+2:]
			continue
		}
		text.WriteString(src[:i])
		advance(src[:i])
		src = src[i:]
		t := token{line: line, col: col}
		inner, n, triple, problem := tagExtent(src)
		if problem == "" {
			problem = t.classify(inner, triple)
		}
		if problem != "" {
			return nil, &SyntaxError{t.line, t.col, problem}
		}
		advance(src[:n])
		src = src[n:]
		flush()
		toks = append(toks, t)
	}
	flush()
	return toks, nil
}

// tagExtent finds the tag src starts with ("{{…}}", "{{{…}}}" or a
// "{{!--…--}}" comment): the text between its delimiters, its length and
// whether it is triple; problem says why it is no tag ("" when it is).
func tagExtent(src string) (inner string, n int, triple bool, problem string) {
	if strings.HasPrefix(src, "{{{{") {
		return "", 0, false, "raw blocks ({{{{…}}}}) are not supported"
	}
	open, closeTag := "{{", "}}"
	triple = strings.HasPrefix(src, "{{{")
	if triple {
		open, closeTag = "{{{", "}}}"
	}
	rest := src[len(open):]
	if !triple && (strings.HasPrefix(rest, "!--") || strings.HasPrefix(rest, "~!--")) {
		j := strings.Index(rest, "--")
		k := strings.Index(rest[j+2:], "--}}")
		if k < 0 {
			k = strings.Index(rest[j+2:], "--~}}")
		}
		if k < 0 {
			return "", 0, false, "comment {{!-- is never closed with --}}"
		}
		end := j + 2 + k
		m := strings.Index(rest[end:], "}}") + 2
		return rest[:end+m-2], len(open) + end + m, false, ""
	}
	k := strings.Index(rest, closeTag)
	if k < 0 {
		return "", 0, triple, "tag is never closed with " + closeTag
	}
	return rest[:k], len(open) + k + len(closeTag), triple, ""
}

// classify sets the token's kind, text and whitespace control from the
// tag's inner text; it returns why the tag is refused ("" when it is not).
func (t *token) classify(inner string, triple bool) string {
	if strings.HasPrefix(inner, "~") {
		t.stripLeft, inner = true, inner[1:]
	}
	if strings.HasSuffix(inner, "~") {
		t.stripRight, inner = true, inner[:len(inner)-1]
	}
	if strings.Contains(inner, "{{") {
		return "a tag contains {{ (a tag is not closed?)"
	}
	switch {
	case triple:
		t.kind, t.text = tagMustache, strings.TrimSpace(inner)
	case strings.HasPrefix(inner, "!"):
		t.kind = tagComment
	case strings.HasPrefix(inner, "#"), strings.HasPrefix(inner, "^") && strings.TrimSpace(inner[1:]) != "":
		t.kind, t.text, t.inverted = tagOpen, strings.TrimSpace(inner[1:]), inner[0] == '^'
		if strings.HasPrefix(t.text, ">") || strings.HasPrefix(t.text, "*") {
			return "partial blocks and decorators are not supported"
		}
	case strings.HasPrefix(inner, "/"):
		t.kind, t.text = tagClose, strings.TrimSpace(inner[1:])
	case strings.TrimSpace(inner) == "^":
		t.kind = tagElse
	case strings.HasPrefix(strings.TrimSpace(inner), ">"):
		return "partials ({{> name}}) are not supported"
	default:
		s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(inner), "&"))
		if s == "else" || strings.HasPrefix(s, "else ") {
			t.kind, t.text = tagElse, strings.TrimSpace(strings.TrimPrefix(s, "else"))
		} else {
			t.kind, t.text = tagMustache, s
		}
	}
	return ""
}

// stripWhitespace applies "~" and removes the line of a block tag, else or
// comment that stands alone on its line, as Handlebars does.
func stripWhitespace(toks []token) {
	text := func(i int) *string {
		if i >= 0 && i < len(toks) && toks[i].kind == tagText {
			return &toks[i].text
		}
		return nil
	}
	for i := range toks {
		t := &toks[i]
		if t.kind == tagText {
			continue
		}
		if t.stripLeft {
			if p := text(i - 1); p != nil {
				*p = strings.TrimRight(*p, " \t\r\n")
			}
		}
		if t.stripRight {
			if p := text(i + 1); p != nil {
				*p = strings.TrimLeft(*p, " \t\r\n")
			}
		}
		if t.kind == tagMustache {
			continue
		}
		prev, next := text(i-1), text(i+1)
		// Alone on its line: only blanks since the previous newline (or the
		// start), only blanks up to the next newline (or the end).
		var before, after int
		switch {
		case prev != nil:
			nl := strings.LastIndexByte(*prev, '\n')
			if nl < 0 && i-1 != 0 || strings.TrimLeft((*prev)[nl+1:], " \t") != "" {
				continue
			}
			before = len(*prev) - nl - 1
		case i != 0:
			continue
		}
		switch {
		case next != nil:
			nl := strings.IndexByte(*next, '\n')
			seg := *next
			if nl >= 0 {
				seg = seg[:nl]
			} else if i+1 != len(toks)-1 {
				continue
			}
			if strings.TrimRight(seg, " \t\r") != "" {
				continue
			}
			after = len(seg)
			if nl >= 0 {
				after = nl + 1
			}
		case i != len(toks)-1:
			continue
		}
		if prev != nil {
			*prev = (*prev)[:len(*prev)-before]
		}
		if next != nil {
			*next = (*next)[after:]
		}
	}
}

type parser struct {
	toks    []token
	pos     int
	helpers map[string]Helper
}

// parseUntil parses nodes until a close or else tag, which it returns.
func (p *parser) parseUntil(open *token) ([]node, *token, error) {
	var out []node
	for p.pos < len(p.toks) {
		t := &p.toks[p.pos]
		p.pos++
		switch t.kind {
		case tagText:
			if t.text != "" {
				out = append(out, textNode{t.text})
			}
		case tagComment:
		case tagMustache:
			m, err := p.mustache(t)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, m)
		case tagOpen:
			b, err := p.block(t)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, b)
		case tagClose, tagElse:
			return out, t, nil
		}
	}
	if open != nil {
		return nil, nil, &SyntaxError{open.line, open.col, "{{#" + open.text + "}} is never closed"}
	}
	return out, nil, nil
}

// block parses an open tag's block up to its close tag.
func (p *parser) block(t *token) (*block, error) {
	words, err := splitArgs(t.text)
	if err != nil {
		return nil, &SyntaxError{t.line, t.col, err.Error()}
	}
	name := words[0]
	b := &block{name: name}
	switch {
	case t.inverted:
		// {{^x}}…{{/x}} is {{#unless x}}.
		if len(words) != 1 {
			return nil, &SyntaxError{t.line, t.col, "{{^" + t.text + "}} takes one value"}
		}
		b.name = blockUnless
		if b.arg, err = p.arg(t, words[0]); err != nil {
			return nil, err
		}
	case name == blockIf || name == blockUnless || name == blockEach || name == blockWith:
		if len(words) != 2 {
			return nil, &SyntaxError{t.line, t.col, fmt.Sprintf("{{#%s}} takes exactly one value, e.g. {{#%s items}}", name, name)}
		}
		if b.arg, err = p.arg(t, words[1]); err != nil {
			return nil, err
		}
	default:
		return nil, &SyntaxError{t.line, t.col, fmt.Sprintf("unknown block {{#%s}}: use #if, #unless, #each or #with", name)}
	}
	body, end, err := p.parseUntil(t)
	if err != nil {
		return nil, err
	}
	b.body = body
	if end.kind == tagElse {
		if end.text != "" {
			// {{else if y}} opens a nested block closed by the same {{/x}}.
			nested := *end
			nested.kind = tagOpen
			inner, err := p.block(&nested)
			if err != nil {
				return nil, err
			}
			b.inverse = []node{inner}
			return b, p.expectClose(t, &p.toks[p.pos-1], words[0])
		}
		inv, end2, err := p.parseUntil(t)
		if err != nil {
			return nil, err
		}
		if end2.kind == tagElse {
			return nil, &SyntaxError{end2.line, end2.col, "a second {{else}} in {{#" + t.text + "}}"}
		}
		b.inverse, end = inv, end2
	}
	return b, p.expectClose(t, end, words[0])
}

func (p *parser) expectClose(open, end *token, name string) error {
	if end.kind != tagClose || end.text != name {
		return &SyntaxError{end.line, end.col, fmt.Sprintf("{{%s}} does not close {{#%s}} (line %d:%d); expected {{/%s}}", tagWord(end), open.text, open.line, open.col, name)}
	}
	return nil
}

func (p *parser) mustache(t *token) (*mustache, error) {
	words, err := splitArgs(t.text)
	if err != nil {
		return nil, &SyntaxError{t.line, t.col, err.Error()}
	}
	m := &mustache{line: t.line, col: t.col}
	if len(words) > 1 {
		m.helper = words[0]
		words = words[1:]
		switch _, known := p.helpers[m.helper]; {
		case m.helper == helperLook:
			if len(words) != 2 {
				return nil, &SyntaxError{t.line, t.col, "{{lookup}} takes a value and a key, e.g. {{lookup obj \"key\"}}"}
			}
		case known:
			if len(words) != 1 {
				return nil, &SyntaxError{t.line, t.col, fmt.Sprintf("{{%s}} takes one value", m.helper)}
			}
		case m.helper == blockIf || m.helper == blockEach || m.helper == blockUnless || m.helper == blockWith:
			return nil, &SyntaxError{t.line, t.col, fmt.Sprintf("%s is a block: write {{#%s …}}…{{/%s}}", m.helper, m.helper, m.helper)}
		default:
			return nil, &SyntaxError{t.line, t.col, fmt.Sprintf("unknown helper %q", m.helper)}
		}
	}
	for _, w := range words {
		a, err := p.arg(t, w)
		if err != nil {
			return nil, err
		}
		m.args = append(m.args, a)
	}
	return m, nil
}

// splitArgs splits a tag's expression into words, keeping quoted strings.
func splitArgs(s string) ([]string, error) {
	var words []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		switch s[0] {
		case '"', '\'':
			j := strings.IndexByte(s[1:], s[0])
			if j < 0 {
				return nil, fmt.Errorf("string %s is never closed", s)
			}
			words = append(words, s[:j+2])
			s = s[j+2:]
		case '(':
			return nil, fmt.Errorf("subexpressions (…) are not supported")
		default:
			k := 0
			for k < len(s) && !strings.ContainsRune(" \t\r\n", rune(s[k])) {
				if s[k] == '[' {
					j := strings.IndexByte(s[k:], ']')
					if j < 0 {
						return nil, fmt.Errorf("segment %s is never closed with ]", s[k:])
					}
					k += j
				}
				k++
			}
			w := s[:k]
			if strings.Contains(w, "=") {
				return nil, fmt.Errorf("hash arguments (%s) are not supported", w)
			}
			if strings.ContainsAny(strings.Split(w, "[")[0], "\"'()") {
				return nil, fmt.Errorf("invalid expression %q", w)
			}
			words = append(words, w)
			s = s[k:]
		}
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty tag {{}}")
	}
	return words, nil
}

// arg parses a literal or a path.
func (p *parser) arg(t *token, w string) (any, error) {
	switch {
	case w[0] == '"' || w[0] == '\'':
		return literal{w[1 : len(w)-1]}, nil
	case w == "true" || w == "false":
		return literal{w == "true"}, nil
	case w == "null" || w == "undefined":
		return literal{nil}, nil
	case w[0] == '-' || w[0] >= '0' && w[0] <= '9':
		f, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return nil, &SyntaxError{t.line, t.col, fmt.Sprintf("invalid number %q", w)}
		}
		return literal{f}, nil
	}
	path, err := parsePath(w)
	if err != nil {
		return nil, &SyntaxError{t.line, t.col, err.Error()}
	}
	return path, nil
}

// parsePath reads this, ./x, ../x, @index, @root.x, a.b, a/b, a.[b c].
func parsePath(w string) (pathExpr, error) {
	var pe pathExpr
	if strings.HasPrefix(w, "@") {
		pe.data, w = true, w[1:]
	}
	for strings.HasPrefix(w, "../") {
		pe.depth++
		w = w[3:]
	}
	if w == ".." {
		pe.depth++
		w = "this"
	}
	if w == "" {
		return pe, fmt.Errorf("empty path")
	}
	for w != "" {
		var seg string
		if w[0] == '[' {
			j := strings.IndexByte(w, ']')
			if j < 0 {
				return pe, fmt.Errorf("segment %s is never closed with ]", w)
			}
			seg, w = w[1:j], w[j+1:]
		} else {
			j := strings.IndexAny(w, "./")
			if j < 0 {
				j = len(w)
			}
			seg, w = w[:j], w[j:]
			if seg == "" && len(pe.parts) == 0 && !pe.data && strings.HasPrefix(w, "./") {
				seg = "." // "./x"
			}
			if seg == "" && w == "." && len(pe.parts) == 0 {
				seg, w = ".", ""
			}
		}
		if seg == "" {
			return pe, fmt.Errorf("invalid path %q", w)
		}
		pe.parts = append(pe.parts, seg)
		if w != "" {
			if w[0] != '.' && w[0] != '/' {
				return pe, fmt.Errorf("invalid path segment %q", w)
			}
			w = w[1:]
			if w == "" {
				return pe, fmt.Errorf("path ends with a separator")
			}
		}
	}
	if !pe.data && (pe.parts[0] == "this" || pe.parts[0] == ".") {
		pe.this, pe.parts = true, pe.parts[1:]
	}
	for _, s := range pe.parts {
		if s == "this" || s == ".." {
			return pe, fmt.Errorf("%q may only start a path", s)
		}
	}
	return pe, nil
}

// Refs returns the top-level names the template reads, outside #each and
// #with bodies (whose paths are relative to the item) unless they climb
// out with ../ or @root.
func (t *Template) Refs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	var visitArg func(a any, scope int)
	visitArg = func(a any, scope int) {
		pe, ok := a.(pathExpr)
		if !ok {
			return
		}
		switch {
		case pe.data:
			if len(pe.parts) >= 2 && pe.parts[0] == "root" {
				add(pe.parts[1])
			}
		case pe.this || len(pe.parts) == 0:
		case scope == pe.depth:
			add(pe.parts[0])
		}
	}
	var walk func(nodes []node, scope int)
	walk = func(nodes []node, scope int) {
		for _, n := range nodes {
			switch x := n.(type) {
			case *mustache:
				for _, a := range x.args {
					visitArg(a, scope)
				}
			case *block:
				visitArg(x.arg, scope)
				inner := scope
				if x.name == blockEach || x.name == blockWith {
					inner++
				}
				walk(x.body, inner)
				walk(x.inverse, scope)
			}
		}
	}
	walk(t.body, 0)
	return out
}
