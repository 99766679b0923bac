// The templateExpand tool expands Go text/template syntax over JSON data
// with a bounded evaluator. Templates are parsed by text/template/parse (the
// standard grammar: actions, pipelines, variables, if/else, range with
// else/break/continue, with, define/template/block, comments, trim
// markers); evaluation is this file's own and walks only JSON-shaped
// values (map[string]any, []any, string, float64, bool, nil).
//
// The evaluator exists because the templates come from the model (a skill
// run may write one with writeArtifact and expand it): every step, every
// loop item and every byte produced counts against a budget, every string
// a function builds is capped, nested {{template}} calls are limited, and
// the context is checked inside loops, so a doubling loop or a nested
// range stops with an error in the calling goroutine instead of exhausting
// memory or spinning on after a timeout. It also never looks a method up
// by name through reflection, which keeps the linker's dead-method
// elimination on.

package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/template/parse"

	"github.com/capstan-dev/capstan/internal/jsonvalue"
	"github.com/capstan-dev/capstan/internal/lazyre"
)

// errTemplateLimit is returned (wrapped) when expansion exceeds its budget:
// the one sentinel of both template evaluators, jsonvalue.ErrBudget.
var errTemplateLimit = jsonvalue.ErrBudget

// templateLimits bound one expandTemplate call; zero fields take the defaults
// (1 MiB of output, 1,000,000 steps).
type templateLimits = jsonvalue.Limits

// printfWidthPattern finds the widths and precisions of printf verbs.
var printfWidthPattern = lazyre.New(`%[-+# 0]*[0-9]+|\.[0-9]+`)

// maxTemplateDepth bounds nested {{template}} calls.
const maxTemplateDepth = 100

// templateFunctions are the functions templates may call: upper lower join json
// default, and text/template's and or not eq ne lt le gt ge len index
// print printf println.
var templateFunctions = []string{"upper", "lower", "join", "json", "default",
	"and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "print", "printf", "println"}

// parseTemplate parses a template; errors carry text/template's "name:line:col"
// position.
func parseTemplate(name, text string) (map[string]*parse.Tree, error) {
	funcs := map[string]any{}
	for _, f := range templateFunctions {
		funcs[f] = true
	}
	trees, err := parse.Parse(name, text, "{{", "}}", funcs)
	if err != nil {
		return nil, err
	}
	return trees, nil
}

// expandTemplate parses text and expands it with data (JSON-shaped). A missing
// map key is an error, as with text/template's missingkey=error.
func expandTemplate(ctx context.Context, name, text string, data any, lim templateLimits) (string, error) {
	trees, err := parseTemplate(name, text)
	if err != nil {
		return "", err
	}
	if lim.MaxOutput <= 0 {
		lim.MaxOutput = 1 << 20
	}
	if lim.MaxSteps <= 0 {
		lim.MaxSteps = 1_000_000
	}
	root := trees[name]
	if root == nil || root.Root == nil {
		return "", nil
	}
	st := &tmplState{budget: jsonvalue.NewBudget(ctx, lim), trees: trees, root: root, lim: lim, vars: []tmplVariable{{"$", data}}}
	if err := st.walk(data, root.Root); err != nil {
		var c tmplControl
		if errors.As(err, &c) {
			return "", fmt.Errorf("%s: {{break}} or {{continue}} outside {{range}}", name)
		}
		return "", err
	}
	return st.budget.Text(), nil
}

type tmplVariable struct {
	name  string
	value any
}

type tmplState struct {
	budget jsonvalue.Budget
	trees  map[string]*parse.Tree
	root   *parse.Tree
	lim    templateLimits
	vars   []tmplVariable
	depth  int
	node   parse.Node
}

// tmplControl carries {{break}} and {{continue}} up to their range.
type tmplControl struct{ brk bool }

func (tmplControl) Error() string { return "break/continue" }

func (s *tmplState) errorf(format string, args ...any) error {
	loc := ""
	if s.node != nil {
		l, c := s.root.ErrorContext(s.node)
		loc = fmt.Sprintf("%s: at <%s>: ", l, c)
	}
	return fmt.Errorf("%s%s", loc, fmt.Sprintf(format, args...))
}

func (s *tmplState) step() error { return s.budget.Step() }

func (s *tmplState) write(str string) error { return s.budget.Write(str) }

// capped fails when a string built by a function is over the output cap.
func (s *tmplState) capped(str string) (any, error) {
	if len(str) > s.lim.MaxOutput {
		return nil, fmt.Errorf("%w: a value larger than %d bytes", errTemplateLimit, s.lim.MaxOutput)
	}
	return str, nil
}

func (s *tmplState) walk(dot any, n parse.Node) error {
	if err := s.step(); err != nil {
		return err
	}
	s.node = n
	switch n := n.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			if err := s.walk(dot, c); err != nil {
				return err
			}
		}
	case *parse.TextNode:
		return s.write(string(n.Text))
	case *parse.CommentNode:
	case *parse.ActionNode:
		v, err := s.pipeline(dot, n.Pipe)
		if err != nil {
			return err
		}
		if len(n.Pipe.Decl) == 0 {
			return s.write(printTemplateValue(v))
		}
	case *parse.IfNode:
		return s.conditional(dot, &n.BranchNode, false)
	case *parse.WithNode:
		return s.conditional(dot, &n.BranchNode, true)
	case *parse.RangeNode:
		return s.rangeNode(dot, n)
	case *parse.TemplateNode:
		t := s.trees[n.Name]
		if t == nil {
			return s.errorf("no template %q", n.Name)
		}
		var v any
		if n.Pipe != nil {
			var err error
			if v, err = s.pipeline(dot, n.Pipe); err != nil {
				return err
			}
		}
		if s.depth >= maxTemplateDepth {
			return fmt.Errorf("%w: {{template}} nested more than %d deep", errTemplateLimit, maxTemplateDepth)
		}
		s.depth++
		saved := s.vars
		s.vars = []tmplVariable{{"$", v}}
		err := s.walk(v, t.Root)
		s.vars = saved
		s.depth--
		return err
	case *parse.BreakNode:
		return tmplControl{brk: true}
	case *parse.ContinueNode:
		return tmplControl{}
	default:
		return s.errorf("unsupported template node %s", n)
	}
	return nil
}

func (s *tmplState) conditional(dot any, b *parse.BranchNode, with bool) error {
	mark := len(s.vars)
	defer func() { s.vars = s.vars[:mark] }()
	v, err := s.pipeline(dot, b.Pipe)
	if err != nil {
		return err
	}
	if jsonvalue.Truthy(v) {
		if with {
			dot = v
		}
		return s.walk(dot, b.List)
	}
	if b.ElseList != nil {
		return s.walk(dot, b.ElseList)
	}
	return nil
}

func (s *tmplState) rangeNode(dot any, r *parse.RangeNode) error {
	mark := len(s.vars)
	defer func() { s.vars = s.vars[:mark] }()
	v, err := s.pipeline(dot, r.Pipe)
	if err != nil {
		return err
	}
	one := func(k, elem any) error {
		if err := s.step(); err != nil {
			return err
		}
		switch len(r.Pipe.Decl) {
		case 1:
			s.vars[len(s.vars)-1].value = elem
		case 2:
			s.vars[len(s.vars)-2].value = k
			s.vars[len(s.vars)-1].value = elem
		}
		inner := len(s.vars)
		err := s.walk(elem, r.List)
		s.vars = s.vars[:inner]
		var c tmplControl
		if errors.As(err, &c) && !c.brk {
			return nil // {{continue}}
		}
		return err
	}
	n := 0
	var loopErr error
	switch x := v.(type) {
	case []any:
		n = len(x)
		for i, e := range x {
			if loopErr = one(float64(i), e); loopErr != nil {
				break
			}
		}
	case map[string]any:
		n = len(x)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if loopErr = one(k, x[k]); loopErr != nil {
				break
			}
		}
	case float64:
		if x != float64(int(x)) || x < 0 {
			return s.errorf("range over %v: not a whole number", x)
		}
		n = int(x)
		for i := 0; i < n; i++ {
			if loopErr = one(float64(i), float64(i)); loopErr != nil {
				break
			}
		}
	case nil:
	default:
		return s.errorf("range can't iterate over %s", printTemplateValue(v))
	}
	var c tmplControl
	if loopErr != nil && !(errors.As(loopErr, &c) && c.brk) {
		return loopErr
	}
	if n == 0 && r.ElseList != nil {
		return s.walk(dot, r.ElseList)
	}
	return nil
}

func (s *tmplState) pipeline(dot any, p *parse.PipeNode) (any, error) {
	if p == nil {
		return nil, nil
	}
	var v any
	var have bool
	for _, c := range p.Cmds {
		var err error
		var final []any
		if have {
			final = []any{v}
		}
		if v, err = s.command(dot, c, final); err != nil {
			return nil, err
		}
		have = true
	}
	for _, d := range p.Decl {
		if p.IsAssign {
			if err := s.setVar(d.Ident[0], v); err != nil {
				return nil, err
			}
		} else {
			s.vars = append(s.vars, tmplVariable{d.Ident[0], v})
		}
	}
	return v, nil
}

func (s *tmplState) setVar(name string, v any) error {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			s.vars[i].value = v
			return nil
		}
	}
	return s.errorf("undefined tmplVariable %s", name)
}

func (s *tmplState) varValue(name string) (any, error) {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			return s.vars[i].value, nil
		}
	}
	return nil, s.errorf("undefined tmplVariable %s", name)
}

func (s *tmplState) command(dot any, c *parse.CommandNode, final []any) (any, error) {
	if err := s.step(); err != nil {
		return nil, err
	}
	first := c.Args[0]
	if id, ok := first.(*parse.IdentifierNode); ok {
		args := make([]any, 0, len(c.Args))
		for _, a := range c.Args[1:] {
			v, err := s.arg(dot, a)
			if err != nil {
				return nil, err
			}
			args = append(args, v)
		}
		return s.call(id.Ident, append(args, final...))
	}
	if len(c.Args) > 1 || final != nil {
		return nil, s.errorf("can't give arguments to a non-function %s", first)
	}
	return s.arg(dot, first)
}

func (s *tmplState) arg(dot any, n parse.Node) (any, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.NilNode:
		return nil, nil
	case *parse.BoolNode:
		return n.True, nil
	case *parse.StringNode:
		return n.Text, nil
	case *parse.NumberNode:
		switch {
		case n.IsInt:
			return float64(n.Int64), nil
		case n.IsUint:
			return float64(n.Uint64), nil
		case n.IsFloat:
			return n.Float64, nil
		}
		return nil, s.errorf("unsupported number %s", n.Text)
	case *parse.FieldNode:
		return s.fields(dot, n.Ident)
	case *parse.VariableNode:
		v, err := s.varValue(n.Ident[0])
		if err != nil {
			return nil, err
		}
		return s.fields(v, n.Ident[1:])
	case *parse.ChainNode:
		v, err := s.arg(dot, n.Node)
		if err != nil {
			return nil, err
		}
		return s.fields(v, n.Field)
	case *parse.PipeNode:
		mark := len(s.vars)
		v, err := s.pipeline(dot, n)
		s.vars = s.vars[:mark]
		return v, err
	case *parse.IdentifierNode:
		return s.call(n.Ident, nil)
	}
	return nil, s.errorf("unsupported argument %s", n)
}

// fields walks .a.b.c; a missing key is an error (missingkey=error).
func (s *tmplState) fields(v any, names []string) (any, error) {
	for _, name := range names {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, s.errorf("can't evaluate field %s in %s", name, jsonKind(v))
		}
		if v, ok = m[name]; !ok {
			return nil, s.errorf("map has no entry for key %q", name)
		}
	}
	return v, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "a null value"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

func (s *tmplState) call(name string, args []any) (any, error) {
	if n, fixed := templateArity(name); fixed && len(args) != n {
		return nil, s.errorf("%s takes %d argument(s), got %d", name, n, len(args))
	}
	switch name {
	case "upper", "lower":
		if name == "upper" {
			return s.capped(strings.ToUpper(printTemplateValue(args[0])))
		}
		return s.capped(strings.ToLower(printTemplateValue(args[0])))
	case "join":
		return s.join(args[0], args[1])
	case "json":
		b, err := json.Marshal(args[0])
		if err != nil {
			return nil, s.errorf("json: %v", err)
		}
		return s.capped(string(b))
	case "default":
		if args[1] == nil || args[1] == "" {
			return args[0], nil
		}
		return args[1], nil
	case "and", "or":
		if len(args) == 0 {
			return nil, s.errorf("%s takes at least one argument", name)
		}
		for _, a := range args[:len(args)-1] {
			if jsonvalue.Truthy(a) == (name == "or") {
				return a, nil
			}
		}
		return args[len(args)-1], nil
	case "not":
		return !jsonvalue.Truthy(args[0]), nil
	case "eq":
		if len(args) < 2 {
			return nil, s.errorf("eq takes at least two arguments")
		}
		for _, b := range args[1:] {
			if eq, err := s.equal(args[0], b); err != nil || eq {
				return eq, err
			}
		}
		return false, nil
	case "ne":
		eq, err := s.equal(args[0], args[1])
		return !eq, err
	case "lt", "le", "gt", "ge":
		c, err := s.compare(args[0], args[1])
		if err != nil {
			return nil, err
		}
		return map[string]bool{"lt": c < 0, "le": c <= 0, "gt": c > 0, "ge": c >= 0}[name], nil
	case "len":
		return s.length(args[0])
	case "index":
		if len(args) == 0 {
			return nil, s.errorf("index takes a value and keys")
		}
		return s.index(args[0], args[1:])
	case "print", "println":
		return s.print(args, name == "println")
	case "printf":
		if len(args) == 0 {
			return nil, s.errorf("printf takes a format")
		}
		return s.printf(args[0], args[1:])
	}
	return nil, s.errorf("function %q not defined", name)
}

// templateArity is the number of arguments function name takes, when that is
// fixed (ok is false for the variadic ones and for names that are no
// function).
func templateArity(name string) (n int, ok bool) {
	switch name {
	case "upper", "lower", "json", "not", "len":
		return 1, true
	case "join", "default", "ne", "lt", "le", "gt", "ge":
		return 2, true
	}
	return 0, false
}

// join is {{join SEP LIST}}: the list's items printed, SEP between them.
func (s *tmplState) join(sepArg, listArg any) (any, error) {
	list, ok := listArg.([]any)
	if !ok {
		return nil, s.errorf("join: the second argument is %s, not a list", jsonKind(listArg))
	}
	sep := printTemplateValue(sepArg)
	size := 0
	parts := make([]string, len(list))
	for i, x := range list {
		parts[i] = printTemplateValue(x)
		size += len(parts[i]) + len(sep)
		if size > s.lim.MaxOutput {
			return s.capped(strings.Repeat(" ", size))
		}
	}
	return strings.Join(parts, sep), nil
}

// length is {{len X}}: the length of a string, list or object.
func (s *tmplState) length(x any) (any, error) {
	switch x := x.(type) {
	case string:
		return float64(len(x)), nil
	case []any:
		return float64(len(x)), nil
	case map[string]any:
		return float64(len(x)), nil
	}
	return nil, s.errorf("len of %s", jsonKind(x))
}

// index is {{index X KEY...}}: X's member or item at each key in turn.
func (s *tmplState) index(v any, keys []any) (any, error) {
	for _, k := range keys {
		switch c := v.(type) {
		case map[string]any:
			key, ok := k.(string)
			if !ok {
				return nil, s.errorf("index of an object with %s", jsonKind(k))
			}
			v = c[key]
		case []any:
			f, ok := k.(float64)
			if !ok || f != float64(int(f)) || f < 0 || int(f) >= len(c) {
				return nil, s.errorf("index %s out of range for a list of %d", printTemplateValue(k), len(c))
			}
			v = c[int(f)]
		default:
			return nil, s.errorf("can't index %s", jsonKind(v))
		}
	}
	return v, nil
}

// print is {{print X...}} (the values side by side) and, with line,
// {{println X...}} (spaces between them, and a newline).
func (s *tmplState) print(args []any, line bool) (any, error) {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = printTemplateValue(a)
	}
	sep := ""
	if line {
		sep = " "
	}
	out := strings.Join(parts, sep)
	if line {
		out += "\n"
	}
	return s.capped(out)
}

// printf is {{printf FORMAT X...}}, refused before it formats when its
// output, widths and precisions counted, would pass the output limit.
func (s *tmplState) printf(formatArg any, args []any) (any, error) {
	format, ok := formatArg.(string)
	if !ok {
		return nil, s.errorf("printf: the format is %s, not a string", jsonKind(formatArg))
	}
	size := len(format)
	for _, a := range args {
		size += len(printTemplateValue(a))
	}
	// Widths and precisions ({{printf "%900000000d" 1}}) count too.
	for _, m := range printfWidthPattern().FindAllString(format, -1) {
		digits := strings.TrimLeft(m, "%-+# 0.")
		n, err := strconv.Atoi(digits)
		if digits != "" && err != nil || n > s.lim.MaxOutput {
			return nil, fmt.Errorf("%w: printf width %s", errTemplateLimit, m)
		}
		size += n
	}
	if size > s.lim.MaxOutput {
		return s.capped(strings.Repeat(" ", size))
	}
	fargs := make([]any, len(args))
	for i, a := range args {
		if f, ok := a.(float64); ok {
			a = printfNumber(f)
		}
		fargs[i] = a
	}
	out := fmt.Sprintf(format, fargs...)
	return s.capped(out)
}

func (s *tmplState) equal(a, b any) (bool, error) {
	switch a.(type) {
	case nil:
		return b == nil, nil
	case string, float64, bool:
		switch b.(type) {
		case nil, string, float64, bool:
			return a == b, nil
		}
	}
	return false, s.errorf("can't compare %s with %s", jsonKind(a), jsonKind(b))
}

func (s *tmplState) compare(a, b any) (int, error) {
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	}
	return 0, s.errorf("can't order %s and %s", jsonKind(a), jsonKind(b))
}

// printTemplateValue prints like text/template: nil is "<no value>", numbers in
// their shortest form, lists and objects in fmt's notation.
func printTemplateValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "<no value>"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// number is a JSON number in printf: whole numbers print with integer
// verbs (%d, %x, %c …), every number with float verbs.
type printfNumber float64

// Format implements fmt.Formatter.
func (n printfNumber) Format(f fmt.State, verb rune) {
	switch verb {
	case 'd', 'b', 'o', 'O', 'x', 'X', 'c', 'q', 'U':
		if float64(n) == float64(int64(n)) {
			fmt.Fprintf(f, fmt.FormatString(f, verb), int64(n))
			return
		}
	case 'v', 's':
		fmt.Fprint(f, printTemplateValue(float64(n)))
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), float64(n))
}
