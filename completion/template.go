package completion

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mailgun/raymond/v2"
	"github.com/mailgun/raymond/v2/ast"
	"github.com/mailgun/raymond/v2/lexer"
	"github.com/mailgun/raymond/v2/parser"

	"github.com/capstan-dev/capstan/internal/yamlsafe"
)

// textHelper is the helper every plain {{path}} is routed through; it
// prints values as prompt text (see formatValue) and returns a SafeString,
// so nothing is HTML-escaped.
const textHelper = "capstanText"

// RenderedTemplate is the result of RenderTemplate.
type RenderedTemplate struct {
	Text string
	// Referenced are the top-level names the template reads, sorted.
	Referenced []string
	// Declared are the params listed in the template's frontmatter, if any.
	Declared []string
}

// RenderTemplate renders a Handlebars retry template with params: {{x}},
// {{a.b}}, {{#each list}}…{{this.name}}…{{/each}}, {{#if x}}…{{else}}…{{/if}}.
// Unlike Handlebars' default, output is never HTML-escaped: test output
// with <, & and quotes reaches the model verbatim. Lists print as
// comma-separated values, objects as JSON. A leading YAML frontmatter
// ("---" … "---") is removed; its "params" list is returned in Declared.
func RenderTemplate(src string, params map[string]any) (rt RenderedTemplate, err error) {
	// raymond panics with runtime errors on some malformed helper calls
	// ({{#if a b}}); a user's template must never crash the run.
	defer func() {
		if r := recover(); r != nil {
			rt, err = RenderedTemplate{}, fmt.Errorf("template cannot be evaluated: %v", r)
		}
	}()
	body, declared, err := splitFrontmatter(src)
	if err != nil {
		return RenderedTemplate{}, err
	}
	prog, err := parser.Parse(body)
	if err != nil {
		return RenderedTemplate{}, err
	}
	refs := map[string]bool{}
	collectRefs(prog, 0, refs)
	rewritten, err := unescapeMustaches(body)
	if err != nil {
		return RenderedTemplate{}, err
	}
	tpl, err := raymond.Parse(rewritten)
	if err != nil {
		return RenderedTemplate{}, err
	}
	tpl.RegisterHelper(textHelper, func(v interface{}) raymond.SafeString {
		return raymond.SafeString(formatValue(v))
	})
	out, err := tpl.Exec(normalize(params))
	if err != nil {
		return RenderedTemplate{}, err
	}
	r := RenderedTemplate{Text: out, Declared: declared}
	for k := range refs {
		r.Referenced = append(r.Referenced, k)
	}
	sort.Strings(r.Referenced)
	return r, nil
}

// splitFrontmatter removes a leading "---\n…\n---\n" block and reads its
// params list.
func splitFrontmatter(src string) (body string, params []string, err error) {
	s := strings.TrimPrefix(src, "\ufeff")
	if !strings.HasPrefix(s, "---\n") && !strings.HasPrefix(s, "---\r\n") {
		return src, nil, nil
	}
	rest := s[strings.IndexByte(s, '\n')+1:]
	end := -1
	for off := 0; off < len(rest); {
		nl := strings.IndexByte(rest[off:], '\n')
		line := rest[off:]
		if nl >= 0 {
			line = rest[off : off+nl]
		}
		if strings.TrimRight(line, "\r") == "---" {
			end = off
			break
		}
		if nl < 0 {
			break
		}
		off += nl + 1
	}
	if end < 0 {
		return src, nil, nil // no closing marker: not frontmatter
	}
	var fm struct {
		Params []string `yaml:"params"`
	}
	if err := yamlsafe.Unmarshal([]byte(rest[:end]), &fm); err != nil {
		return "", nil, fmt.Errorf("frontmatter: %v", err)
	}
	body = rest[end:]
	if nl := strings.IndexByte(body, '\n'); nl >= 0 {
		body = body[nl+1:]
	} else {
		body = ""
	}
	return body, fm.Params, nil
}

// unescapeMustaches rewrites the template with raymond's own lexer so no
// mustache escapes HTML: a plain path ({{x}}, {{a.b}}, {{this}}) becomes
// {{capstanText x}}, any other expression gets the "&" (unescaped) flag.
func unescapeMustaches(src string) (string, error) {
	toks := lexer.Collect(src)
	var b strings.Builder
	last := 0
	for i, t := range toks {
		switch t.Kind {
		case lexer.TokenError:
			return "", fmt.Errorf("template line %d: %s", t.Line+1, t.Val)
		case lexer.TokenOpen, lexer.TokenOpenUnescaped:
		default:
			continue
		}
		closeKind := lexer.TokenClose
		if t.Kind == lexer.TokenOpenUnescaped {
			closeKind = lexer.TokenCloseUnescaped
		}
		simple, j := true, i+1
		for ; j < len(toks) && toks[j].Kind != closeKind; j++ {
			switch toks[j].Kind {
			case lexer.TokenID, lexer.TokenSep, lexer.TokenData:
			default:
				simple = false
			}
			if toks[j].Kind == lexer.TokenEOF || toks[j].Kind == lexer.TokenError {
				break
			}
		}
		insertAt := t.Pos + len(t.Val)
		var insert string
		switch {
		case simple && j > i+1:
			insert = textHelper + " "
		case t.Kind == lexer.TokenOpen && !strings.Contains(t.Val, "&"):
			insert = "&"
		default:
			continue
		}
		b.WriteString(src[last:insertAt])
		b.WriteString(insert)
		last = insertAt
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

// scoped block helpers change the context of their body.
var scopedHelpers = map[string]bool{"each": true, "with": true}

// builtinHelpers are names that are helpers, not params.
var builtinHelpers = map[string]bool{"if": true, "unless": true, "each": true, "with": true, "log": true,
	"lookup": true, "equal": true, textHelper: true}

// collectRefs records the top-level param names a template reads. Paths
// inside {{#each}}/{{#with}} (and mustache sections over a value) are
// relative to the item and are skipped unless they climb out with ../ or
// @root.
func collectRefs(n ast.Node, depth int, refs map[string]bool) {
	switch x := n.(type) {
	case *ast.Program:
		if x == nil {
			return
		}
		for _, s := range x.Body {
			collectRefs(s, depth, refs)
		}
	case *ast.MustacheStatement:
		collectRefs(x.Expression, depth, refs)
	case *ast.BlockStatement:
		collectRefs(x.Expression, depth, refs)
		inner := depth
		if name := helperName(x.Expression); scopedHelpers[name] || (name != "" && !builtinHelpers[name] && len(x.Expression.Params) == 0) {
			inner++
		}
		if x.Program != nil {
			collectRefs(x.Program, inner, refs)
		}
		if x.Inverse != nil {
			collectRefs(x.Inverse, depth, refs)
		}
	case *ast.PartialStatement:
		for _, p := range x.Params {
			collectRefs(p, depth, refs)
		}
	case *ast.Expression:
		if x == nil {
			return
		}
		isCall := len(x.Params) > 0 || x.Hash != nil
		if p, ok := x.Path.(*ast.PathExpression); ok && !isCall && !builtinHelpers[pathHead(p)] {
			recordPath(p, depth, refs)
		}
		for _, p := range x.Params {
			collectRefs(p, depth, refs)
		}
		if x.Hash != nil {
			for _, hp := range x.Hash.Pairs {
				collectRefs(hp.Val, depth, refs)
			}
		}
	case *ast.SubExpression:
		collectRefs(x.Expression, depth, refs)
	case *ast.PathExpression:
		recordPath(x, depth, refs)
	}
}

func helperName(e *ast.Expression) string {
	if e == nil {
		return ""
	}
	if p, ok := e.Path.(*ast.PathExpression); ok {
		return pathHead(p)
	}
	return ""
}

func pathHead(p *ast.PathExpression) string {
	if len(p.Parts) == 0 {
		return ""
	}
	return p.Parts[0]
}

func recordPath(p *ast.PathExpression, depth int, refs map[string]bool) {
	parts := p.Parts
	if p.Data {
		if len(parts) < 2 || parts[0] != "root" {
			return // @index, @key, @first …
		}
		refs[parts[1]] = true
		return
	}
	if len(parts) == 0 || p.Scoped && p.Depth == 0 { // this, this.x, ./x
		return
	}
	if depth-p.Depth == 0 {
		refs[parts[0]] = true
	}
}

// normalize turns params into plain JSON-shaped values (maps, slices,
// strings, float64, bool) so templates address struct fields by their JSON
// names ({{this.name}}, {{this.error}}).
func normalize(params map[string]any) map[string]any {
	b, err := json.Marshal(params)
	if err != nil {
		return params
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil || out == nil {
		return map[string]any{}
	}
	return out
}

// formatValue prints a param as prompt text: strings verbatim, lists
// comma-separated, objects as JSON, whole numbers without a decimal point.
func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprint(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatValue(e)
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(x) != nil {
			return fmt.Sprint(x)
		}
		return strings.TrimRight(b.String(), "\n")
	default:
		return fmt.Sprint(x)
	}
}
