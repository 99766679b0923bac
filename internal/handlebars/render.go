package handlebars

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/internal/jsonvalue"
)

// Default bounds of Render.
const (
	// DefaultMaxOutput caps the rendered text (bytes).
	DefaultMaxOutput = 4 << 20
	// DefaultMaxSteps caps the work: one step per node rendered and per
	// loop item.
	DefaultMaxSteps = 1_000_000
)

// ErrLimit is returned (wrapped) when rendering exceeds its step or output
// budget: the one sentinel of both template evaluators, jsonvalue.ErrBudget.
var ErrLimit = jsonvalue.ErrBudget

// Limits bound one Render call; zero fields take the defaults.
type Limits = jsonvalue.Limits

// frame is one context level: the value and the loop's data variables.
type frame struct {
	v     any
	index int
	key   string
	first bool
	last  bool
	loop  bool
	isMap bool
}

type renderer struct {
	t      *Template
	stack  []frame
	budget jsonvalue.Budget
}

// Render renders the template with data, which must be JSON-shaped
// (map[string]any, []any, string, float64, bool, nil — jsonvalue.Normalize
// turns anything else into that). It stops with an error wrapping ErrLimit when
// the budget is exceeded and with ctx's error when ctx ends.
func (t *Template) Render(ctx context.Context, data any, lim Limits) (string, error) {
	if lim.MaxOutput <= 0 {
		lim.MaxOutput = DefaultMaxOutput
	}
	if lim.MaxSteps <= 0 {
		lim.MaxSteps = DefaultMaxSteps
	}
	r := &renderer{t: t, budget: jsonvalue.NewBudget(ctx, lim), stack: []frame{{v: data}}}
	if err := r.nodes(t.body); err != nil {
		return "", err
	}
	return r.budget.Text(), nil
}

// step counts one unit of work and checks the context every 1024 steps.
func (r *renderer) step() error { return r.budget.Step() }

func (r *renderer) write(s string) error { return r.budget.Write(s) }

func (r *renderer) nodes(ns []node) error {
	for _, n := range ns {
		if err := r.step(); err != nil {
			return err
		}
		var err error
		switch x := n.(type) {
		case textNode:
			err = r.write(x.s)
		case *mustache:
			err = r.mustache(x)
		case *block:
			err = r.block(x)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) mustache(m *mustache) error {
	switch m.helper {
	case "":
		return r.write(Format(r.value(m.args[0])))
	case helperLook:
		return r.write(Format(index(r.value(m.args[0]), r.value(m.args[1]))))
	default:
		return r.write(r.t.helpers[m.helper](r.value(m.args[0])))
	}
}

func (r *renderer) block(b *block) error {
	v := r.value(b.arg)
	switch b.name {
	case blockIf, blockUnless:
		if jsonvalue.Truthy(v) == (b.name == blockIf) {
			return r.nodes(b.body)
		}
		return r.nodes(b.inverse)
	case blockWith:
		if !jsonvalue.Truthy(v) {
			return r.nodes(b.inverse)
		}
		return r.scoped(frame{v: v}, b.body)
	}
	// each
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			break
		}
		for i, item := range x {
			if err := r.step(); err != nil {
				return err
			}
			if err := r.scoped(frame{v: item, index: i, first: i == 0, last: i == len(x)-1, loop: true}, b.body); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if len(x) == 0 {
			break
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if err := r.step(); err != nil {
				return err
			}
			f := frame{v: x[k], index: i, key: k, first: i == 0, last: i == len(keys)-1, loop: true, isMap: true}
			if err := r.scoped(f, b.body); err != nil {
				return err
			}
		}
		return nil
	}
	return r.nodes(b.inverse)
}

func (r *renderer) scoped(f frame, body []node) error {
	r.stack = append(r.stack, f)
	err := r.nodes(body)
	r.stack = r.stack[:len(r.stack)-1]
	return err
}

// value evaluates an argument.
func (r *renderer) value(a any) any {
	switch x := a.(type) {
	case literal:
		return x.v
	case pathExpr:
		if x.data {
			return r.dataVar(x)
		}
		i := len(r.stack) - 1 - x.depth
		if i < 0 {
			return nil
		}
		v := r.stack[i].v
		for _, p := range x.parts {
			v = index(v, p)
		}
		return v
	}
	return nil
}

// dataVar evaluates @index, @key, @first, @last and @root.x.
func (r *renderer) dataVar(x pathExpr) any {
	if x.parts[0] == "root" {
		v := r.stack[0].v
		for _, p := range x.parts[1:] {
			v = index(v, p)
		}
		return v
	}
	var f *frame
	for i, d := len(r.stack)-1, x.depth; i >= 0; i-- {
		if r.stack[i].loop {
			if d == 0 {
				f = &r.stack[i]
				break
			}
			d--
		}
	}
	if f == nil || len(x.parts) != 1 {
		return nil
	}
	switch x.parts[0] {
	case "index":
		return float64(f.index)
	case "key":
		if f.isMap {
			return f.key
		}
		return float64(f.index)
	case "first":
		return f.first
	case "last":
		return f.last
	}
	return nil
}

// index reads a map key or a list position.
func index(v, key any) any {
	switch c := v.(type) {
	case map[string]any:
		k, ok := key.(string)
		if !ok {
			k = Format(key)
		}
		return c[k]
	case []any:
		var i int
		switch k := key.(type) {
		case float64:
			i = int(k)
		case string:
			n, err := strconv.Atoi(k)
			if err != nil {
				if k == "length" {
					return float64(len(c))
				}
				return nil
			}
			i = n
		default:
			return nil
		}
		if i >= 0 && i < len(c) {
			return c[i]
		}
	case string:
		if key == "length" {
			return float64(len(c))
		}
	}
	return nil
}

// Format prints a value as prompt text: strings verbatim, lists
// comma-separated, objects as JSON, whole numbers without a decimal point.
func Format(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = Format(e)
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
	}
	return fmt.Sprint(v)
}
