package handlebars

import (
	"fmt"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/jsonvalue"
)

// conformanceCase is one template feature: the template, its data, and
// what capstan documents it renders (want, or an error containing
// wantErr).
type conformanceCase struct {
	feature, src string
	data         map[string]any
	want         string
	wantErr      string
}

var featureData = map[string]any{
	"name": "<a & b>", "n": 3, "f": 1.5, "yes": true, "empty": "", "zero": 0,
	"list": []any{"x", "y", "z"}, "none": []any{},
	"obj":   map[string]any{"k": "v", "inner": map[string]any{"deep": "D"}, "sp ace": "S"},
	"items": []map[string]any{{"name": "a", "tags": []string{"t1", "t2"}}, {"name": "b"}},
	"top":   "T",
	"failedTests": []map[string]any{{"name": "TestAdd", "error": `got <1> & want "2"`},
		{"name": "TestSub", "error": "a && b > c"}},
}

// conformanceCases are capstan's handlebars test cases (TestRender,
// TestStandaloneLines, TestValuesAreNotTemplates) and the template
// features climpt documents for retry prompts ({{var}}, {{a.b}},
// {{#each}} with {{this}} and {{this.prop}}, {{#if}}/{{else}}, arrays
// joined with ", "), then what a template author could reach beyond
// them (helpers, partials).
var conformanceCases = []conformanceCase{
	{"climpt: {{var}} and {{a.b}}", "{{top}} {{obj.k}}", nil, "T v", ""},
	{"climpt: #each with this.prop", "{{#each failedTests}}- {{this.name}}\n{{/each}}", nil, "- TestAdd\n- TestSub\n", ""},
	{"climpt: #each with this", "{{#each list}}[{{this}}]{{/each}}", nil, "[x][y][z]", ""},
	{"climpt: #if / else", "{{#if yes}}Y{{else}}N{{/if}}{{#if empty}}Y{{else}}N{{/if}}", nil, "YN", ""},
	{"climpt: arrays joined with \", \"", "{{list}}", nil, "x, y, z", ""},
	{"no HTML escaping of test output", "{{#each failedTests}}{{error}};{{/each}}", nil, `got <1> & want "2";a && b > c;`, ""},
	{"{{x}} {{{x}}} {{&x}}", "{{name}} {{{name}}} {{&name}}", nil, "<a & b> <a & b> <a & b>", ""},
	{"numbers, bools, objects, paths", "{{n}} {{f}} {{yes}} {{obj.k}} {{obj/inner/deep}} {{obj.[sp ace]}}", nil, "3 1.5 true v D S", ""},
	{"an object prints as JSON", "{{obj.inner}}", nil, `{"deep":"D"}`, ""},
	{"missing variables are empty", "{{missing}}|{{obj.missing.deeper}}", nil, "|", ""},
	{"#if on 0, empty list; {{^}}", "{{#if zero}}Y{{/if}}{{#if none}}Y{{^}}E{{/if}}", nil, "E", ""},
	{"#unless, inverted section", "{{#unless empty}}U{{/unless}}{{^yes}}no{{/yes}}", nil, "U", ""},
	{"else if chain", "{{#if empty}}1{{else if zero}}2{{else if n}}3{{else}}4{{/if}}", nil, "3", ""},
	{"@index @first @last", "{{#each list}}{{@index}}{{this}}{{#if @first}}F{{/if}}{{#if @last}}L{{/if}},{{/each}}", nil, "0xF,1y,2zL,", ""},
	{"nested #each, ../ and @../index", "{{#each items}}{{name}}:{{#each tags}}{{this}}@{{../name}}/{{@../index}}{{else}}-{{/each}}{{../top}};{{/each}}", nil, "a:t1@a/0t2@a/0T;b:-T;", ""},
	{"#each over an object, @key, #with", "{{#each obj}}{{@key}}={{#with this}}{{.}}{{/with}} {{/each}}", nil, `inner={"deep":"D"} k=v sp ace=S `, ""},
	{"#each else", "{{#each none}}x{{else}}nothing{{/each}}", nil, "nothing", ""},
	{"#with, @root, #with else", "{{#with obj.inner}}{{deep}}{{@root.top}}{{/with}}{{#with missing}}x{{else}}w{{/with}}", nil, "DTw", ""},
	{"lookup", "{{lookup obj 'k'}}{{lookup list 1}}", nil, "vy", ""},
	{"comments", "{{! comment }}{{!-- a }} comment --}}x", nil, "x", ""},
	{`\{{ escape`, `\{{name}} {{top}}`, nil, "{{name}} T", ""},
	{"~ whitespace control", "a  {{~top~}}  b", nil, "aTb", ""},
	{".length", "{{list.length}} {{top.length}}", nil, "3 1", ""},
	{"standalone block lines", "## T\n\n{{#each list}}\n- {{this}}\n{{/each}}\n\n  {{#if yes}}  \nX\n{{else}}\nnone\n{{/if}}\nend\n{{! note }}\n", nil,
		"## T\n\n- x\n- y\n- z\n\nX\nend\n", ""},
	{"a value that looks like a template is printed", "{{a}}", map[string]any{"a": "{{b}} {{#each x}}", "b": "secret"}, "{{b}} {{#each x}}", ""},
	{"helper beyond the documented set: #equal", "{{#equal n 3}}eq{{/equal}}", nil, "", "unknown block {{#equal}}"},
	{"helper beyond the documented set: log", "{{log top}}", nil, "", `unknown helper "log"`},
	{"helper beyond the documented set: pluralize", "{{pluralize n 'test'}}", nil, "", `unknown helper "pluralize"`},
	{"a helper called without its key", "{{lookup list}}", nil, "", "{{lookup}} takes a value and a key"},
	{"a block helper called without its value", "{{#if}}x{{/if}}", nil, "", "{{#if}} takes exactly one value"},
	{"a partial (none is registered for retry prompts)", "{{> header}}", nil, "", "partials"},
	{"an unclosed block: the error's position", "ok\n{{#each list}}\nx", nil, "", "line 2:1: {{#each list}} is never closed"},
	{"a mismatched close: the error's position", "ok\n  {{#if yes}}{{/each}}", nil, "", "line 2:14: {{/each}} does not close {{#if yes}}"},
}

func cell(out string, err error) string {
	if err != nil {
		out = "error: " + err.Error()
	}
	out = strings.NewReplacer("\n", `\n`, "|", `\|`).Replace(out)
	if len(out) > 70 {
		out = out[:67] + "..."
	}
	return "`" + out + "`"
}

// TestConformance renders every case through capstan's renderer and
// through raymond and logs the table docs/benchmarks.md reproduces
// (go test -run Conformance -v). It fails when capstan's renderer does
// not do what capstan documents; raymond's column is the record.
func TestConformance(t *testing.T) {
	var table strings.Builder
	table.WriteString("| feature | capstan | raymond | same |\n|---|---|---|---|\n")
	same := 0
	for _, c := range conformanceCases {
		data := c.data
		if data == nil {
			data = featureData
		}
		norm := jsonvalue.Normalize(data)
		cout, cerr := capstanRender(c.src, norm)
		switch {
		case c.wantErr != "" && (cerr == nil || !strings.Contains(cerr.Error(), c.wantErr)):
			t.Errorf("%s: capstan %q, %v; want an error containing %q", c.feature, cout, cerr, c.wantErr)
		case c.wantErr == "" && (cerr != nil || cout != c.want):
			t.Errorf("%s: capstan %q, %v; want %q", c.feature, cout, cerr, c.want)
		}
		rout, rerr := raymondRender(c.src, norm)
		eq := "no"
		if (cerr == nil) == (rerr == nil) && (cerr != nil || cout == rout) {
			eq = "yes"
			same++
		}
		fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", strings.ReplaceAll(c.feature, "|", `\|`), cell(cout, cerr), cell(rout, rerr), eq)
	}
	t.Logf("%d of %d cases alike\n%s", same, len(conformanceCases), table.String())
}
