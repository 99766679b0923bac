package handlebars

import (
	"context"
	"errors"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
	"strings"
	"testing"
	"time"
)

func render(t *testing.T, src string, data any) string {
	t.Helper()
	tpl, err := Parse(src, map[string]Helper{"json": func(v any) string { return "J(" + Format(v) + ")" }})
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	out, err := tpl.Render(context.Background(), jsonvalue.Normalize(data), Limits{})
	if err != nil {
		t.Fatalf("render %q: %v", src, err)
	}
	return out
}

func TestRender(t *testing.T) {
	data := map[string]any{
		"name": "<a & b>", "n": 3, "f": 1.5, "yes": true, "empty": "", "zero": 0,
		"list": []any{"x", "y", "z"}, "none": []any{},
		"obj":   map[string]any{"k": "v", "inner": map[string]any{"deep": "D"}, "sp ace": "S"},
		"items": []map[string]any{{"name": "a", "tags": []string{"t1", "t2"}}, {"name": "b"}},
		"top":   "T",
	}
	cases := []struct{ src, want string }{
		{"{{name}} {{{name}}} {{&name}}", "<a & b> <a & b> <a & b>"},
		{"{{n}} {{f}} {{yes}} {{list}} {{obj.k}} {{obj/inner/deep}} {{obj.[sp ace]}}", "3 1.5 true x, y, z v D S"},
		{"{{missing}}|{{obj.missing.deeper}}", "|"},
		{"{{#if yes}}Y{{else}}N{{/if}}{{#if empty}}Y{{else}}N{{/if}}{{#if zero}}Y{{/if}}{{#if none}}Y{{^}}E{{/if}}", "YNE"},
		{"{{#unless empty}}U{{/unless}}{{^yes}}no{{/yes}}", "U"},
		{"{{#if empty}}1{{else if zero}}2{{else if n}}3{{else}}4{{/if}}", "3"},
		{"{{#each list}}{{@index}}{{this}}{{#if @first}}F{{/if}}{{#if @last}}L{{/if}},{{/each}}", "0xF,1y,2zL,"},
		{"{{#each items}}{{name}}:{{#each tags}}{{this}}@{{../name}}/{{@../index}}{{else}}-{{/each}}{{../top}};{{/each}}", "a:t1@a/0t2@a/0T;b:-T;"},
		{"{{#each obj}}{{@key}}={{#with this}}{{.}}{{/with}} {{/each}}", "inner={\"deep\":\"D\"} k=v sp ace=S "},
		{"{{#each none}}x{{else}}nothing{{/each}}", "nothing"},
		{"{{#with obj.inner}}{{deep}}{{@root.top}}{{/with}}{{#with missing}}x{{else}}w{{/with}}", "DTw"},
		{"{{lookup obj 'k'}}{{lookup list 1}}{{json obj.k}}", "vyJ(v)"},
		{"{{! comment }}{{!-- a }} comment --}}x", "x"},
		{`\{{name}} {{name}}`, "{{name}} <a & b>"},
		{"a  {{~name~}}  b", "a<a & b>b"},
		{"{{list.length}} {{name.length}}", "3 7"},
	}
	for _, c := range cases {
		if got := render(t, c.src, data); got != c.want {
			t.Errorf("%q:\n got  %q\n want %q", c.src, got, c.want)
		}
	}
}

// A block tag alone on its line takes its line with it, as in Handlebars.
func TestStandaloneLines(t *testing.T) {
	src := "## T\n\n{{#each l}}\n- {{this}}\n{{/each}}\n\n  {{#if x}}  \nX\n{{else}}\nnone\n{{/if}}\nend\n{{! note }}\n"
	got := render(t, src, map[string]any{"l": []any{"a", "b"}, "x": "1"})
	if want := "## T\n\n- a\n- b\n\nX\nend\n"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if got := render(t, "{{#if x}}inline{{/if}} stays\n", map[string]any{"x": 1}); got != "inline stays\n" {
		t.Fatalf("inline: %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{{#each x}}\nunclosed", "line 1:1: {{#each x}} is never closed"},
		{"ok\n  {{#if x}}{{/each}}", "line 2:12: {{/each}} does not close {{#if x}} (line 2:3); expected {{/if}}"},
		{"{{x", "line 1:1: tag is never closed with }}"},
		{"a\n{{/if}}", "line 2:1: unexpected {{/if}} outside a block"},
		{"{{> partial}}", "partials"},
		{"{{{{raw}}}}x{{{{/raw}}}}", "raw blocks"},
		{"{{#if}}{{/if}}", "{{#if}} takes exactly one value"},
		{"{{#if a b}}{{/if}}", "takes exactly one value"},
		{"{{#foo x}}{{/foo}}", "unknown block {{#foo}}"},
		{"{{shout x}}", `unknown helper "shout"`},
		{"{{lookup x}}", "{{lookup}} takes a value and a key"},
		{"{{x a=b}}", "hash arguments"},
		{"{{x (y)}}", "subexpressions"},
		{"{{}}", "empty tag"},
		{"{{a..b}}", "invalid path"},
		{"{{#if x}}{{else}}{{else}}{{/if}}", "a second {{else}}"},
		{"{{!-- open", "never closed with --}}"},
	}
	for _, c := range cases {
		_, err := Parse(c.src, nil)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
}

func TestRefs(t *testing.T) {
	tpl, err := Parse("{{a}} {{b.c}} {{#each l}}{{name}}{{../d}}{{this}}{{@root.e}}{{else}}{{f}}{{/each}}{{#if g}}{{h}}{{/if}}{{lookup i 'x'}}{{@index}}", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tpl.Refs(), ","); got != "a,b,l,d,e,f,g,h,i" {
		t.Fatalf("refs = %s", got)
	}
}

// Values are data: a value that looks like a template is printed, never
// evaluated.
func TestValuesAreNotTemplates(t *testing.T) {
	if got := render(t, "{{a}}", map[string]any{"a": "{{b}} {{#each x}}", "b": "secret"}); got != "{{b}} {{#each x}}" {
		t.Fatal(got)
	}
}

// Nested loops over a large list stop at the step budget, and a canceled
// context stops rendering, instead of running on.
func TestBudgets(t *testing.T) {
	big := make([]any, 2000)
	for i := range big {
		big[i] = "x"
	}
	tpl, err := Parse("{{#each l}}{{#each ../l}}{{#each ../../l}}{{this}}{{/each}}{{/each}}{{/each}}", nil)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"l": big}
	if _, err := tpl.Render(context.Background(), data, Limits{}); !errors.Is(err, ErrLimit) {
		t.Fatalf("steps: %v", err)
	}
	if _, err := tpl.Render(context.Background(), data, Limits{MaxSteps: 1 << 40, MaxOutput: 1000}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "output") {
		t.Fatalf("output: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	tpl2, _ := Parse("{{#each l}}{{#each ../l}}{{#each ../../l}}{{/each}}{{/each}}{{/each}}", nil)
	if _, err := tpl2.Render(ctx, data, Limits{MaxSteps: 1 << 40}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx: %v", err)
	}
}

func FuzzParseRender(f *testing.F) {
	for _, s := range []string{"{{#each x}}{{this}}{{/each}}", "{{x}", "{{#if x}}{{else if y}}{{/if}}", "{{!-- --}}", "\\{{x}}", "{{~x~}}", "{{a.[b}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src, nil)
		if err != nil {
			return
		}
		_, _ = tpl.Render(context.Background(), map[string]any{"x": []any{"a", map[string]any{"b": 1.0}}, "y": "v"}, Limits{MaxSteps: 10000})
	})
}
