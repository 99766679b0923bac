package skill

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func expandTestTemplate(t *testing.T, src, data string) (string, error) {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatal(err)
	}
	return expandTemplate(context.Background(), "t", src, v, templateLimits{})
}

func TestGoTemplate(t *testing.T) {
	data := `{"title":"Report <1>","total":3,"by_state":{"open":2,"closed":1},"items":[{"n":"a","ok":true},{"n":"b","ok":false}],"empty":[],"none":null,"tags":["x","y"],"ratio":0.5}`
	cases := []struct{ src, want string }{
		{"# {{.title}}\n{{.total}} items: {{range $tmplState, $n := .by_state}}{{$n}} {{$tmplState}}, {{end}}ratio {{.ratio}}.", "# Report <1>\n3 items: 1 closed, 2 open, ratio 0.5."},
		{"{{range $i, $it := .items}}{{$i}}:{{.n}}{{if .ok}}+{{else}}-{{end}} {{end}}", "0:a+ 1:b- "},
		{"{{range .empty}}x{{else}}none{{end}}|{{with .none}}x{{else}}null{{end}}|{{with .items}}{{len .}}{{end}}", "none|null|2"},
		{"{{range .tags}}{{if eq . \"x\"}}{{continue}}{{end}}{{.}}{{end}}{{range .tags}}{{.}}{{break}}{{end}}", "yx"},
		{"{{upper .title}} {{lower \"AB\"}} {{join \", \" .tags}} {{json .by_state}} {{default \"n/a\" .none}} {{.none | default \"d\"}}", `REPORT <1> ab x, y {"closed":1,"open":2} n/a d`},
		{`{{define "row"}}[{{.n}}]{{end}}{{range .items}}{{template "row" .}}{{end}}{{block "b" .title}}<{{.}}>{{end}}`, "[a][b]<Report <1>>"},
		{`{{$x := 1}}{{if gt .total 2.0}}{{$x = 2}}{{end}}{{$x}} {{and 1 0}} {{or 0 "y"}} {{not .none}} {{ne .total 3}} {{le 1 1}} {{lt "a" "b"}}`, "2 0 y true false true true"},
		{`{{index .items 1 | json}} {{index .by_state "open"}} {{len .title}} {{printf "%s=%03d" "n" 7}} {{print 1 "a"}}{{println "z"}}`, `{"n":"b","ok":false} 2 10 n=007 1az` + "\n"},
		{"{{- .title -}}  \n  {{/* comment */}}", "Report <1>"},
		{"{{range 3}}{{.}}{{end}}", "012"},
	}
	for _, c := range cases {
		got, err := expandTestTemplate(t, c.src, data)
		if err != nil || got != c.want {
			t.Errorf("%q:\n got  %q, %v\n want %q", c.src, got, err, c.want)
		}
	}
}

func TestGoTemplateErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{{.missing}}", `t:1:2: at <{{.missing}}>: map has no entry for key "missing"`},
		{"line\n{{.title.x}}", `can't evaluate field x in a string`},
		{"{{nofunc 1}}", `function "nofunc" not defined`},
		{"{{if}}", "missing value for if"},
		{"{{range .title}}{{end}}", "range can't iterate over"},
		{"{{index .tags 5}}", "index 5 out of range"},
		{"{{break}}", "{{break}} outside {{range}}"},
		{`{{template "nope"}}`, `no template "nope"`},
	}
	for _, c := range cases {
		_, err := expandTestTemplate(t, c.src, `{"title":"s","tags":["a"]}`)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
}

// A template written by the model cannot exhaust memory: strings that
// double on each iteration, huge printf widths and recursion stop at the
// budget with errTemplateLimit.
func TestGoTemplateBounded(t *testing.T) {
	for _, src := range []string{
		`{{$s := "xxxxxxxxxxxxxxxx"}}{{range 64}}{{$s = printf "%s%s" $s $s}}{{end}}{{$s}}`,
		`{{$s := "xxxxxxxxxxxxxxxx"}}{{range 64}}{{$s = print $s $s}}{{end}}`,
		`{{printf "%900000000d" 1}}`,
		`{{printf "%.900000000f" 1.0}}`,
		`{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`,
		`{{range 100000}}{{range 100000}}{{end}}{{end}}`,
		`{{range 2000}}{{range 2000}}xxxxxxxxxxxxxxxxxxxx{{end}}{{end}}`,
	} {
		_, err := expandTestTemplate(t, src, `{}`)
		if !errors.Is(err, errTemplateLimit) {
			t.Errorf("%s: got %v, want the budget error", src, err)
		}
	}
}

// Cancellation stops the expansion inside its loops, in the caller's
// goroutine: nothing keeps running after expandTemplate returns.
func TestGoTemplateStopsOnCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := expandTemplate(ctx, "t", `{{range 100000}}{{range 100000}}{{range 100000}}{{end}}{{end}}{{end}}`, map[string]any{}, templateLimits{MaxSteps: 1 << 50})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// The evaluation's goroutine ends after the error is returned, and a
	// goroutine an earlier test left may still be ending: wait for the
	// count to come back rather than reading it once.
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines %d → %d: the canceled evaluation did not end", before, after)
	}
}

func FuzzGoTemplate(f *testing.F) {
	for _, s := range []string{"{{range .a}}{{.}}{{end}}", "{{with $x := .a}}{{$x}}{{end}}", `{{printf "%d" .a}}`, "{{index .a 0 1}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		_, _ = expandTemplate(context.Background(), "t", src, map[string]any{"a": []any{1.0, "s", map[string]any{"k": nil}}}, templateLimits{MaxSteps: 10000, MaxOutput: 1 << 16})
	})
}
