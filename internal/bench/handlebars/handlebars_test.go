package handlebars

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/handlebars"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
	"github.com/mailgun/raymond/v2"
)

// retryTemplate is the body of the test-failed retry prompt of capstan's
// retry benchmark (verdict's BenchmarkBuildRetryPrompt), without its
// frontmatter.
const retryTemplate = "## Tests are failing\n\n{{#each failedTests}}\n- `{{this.name}}`: {{this.error}}\n{{/each}}\n\n" +
	"{{#if errorOutput}}\n### Error output\n{{errorOutput}}\n{{else}}\n(no stderr)\n{{/if}}\nFix the failing tests.\n"

// retryData is that benchmark's data: 50 failed tests whose messages
// carry <, & and quotes, as a test run prints them, in the JSON shape
// capstan renders from (jsonvalue.Normalize).
func retryData() map[string]any {
	var failed []map[string]any
	for i := 0; i < 50; i++ {
		failed = append(failed, map[string]any{"name": fmt.Sprintf("Test%d", i), "error": `got <1> & want "2"`})
	}
	return jsonvalue.Normalize(map[string]any{"failedTests": failed,
		"errorOutput": `exit status 1 & <stderr> 'quoted' "double"`}).(map[string]any)
}

// unescaped rewrites {{x}} to {{{x}}} for the value mustaches of the
// retry template: raymond HTML-escapes {{x}}, capstan never does, and
// this is how a raymond user gets capstan's output.
func unescaped(src string) string {
	for _, v := range []string{"this.name", "this.error", "errorOutput"} {
		src = strings.ReplaceAll(src, "{{"+v+"}}", "{{{"+v+"}}}")
	}
	return src
}

func capstanRender(src string, data any) (string, error) {
	tpl, err := handlebars.Parse(src, nil)
	if err != nil {
		return "", err
	}
	return tpl.Render(context.Background(), data, handlebars.Limits{MaxOutput: 1 << 20, MaxSteps: 200_000})
}

func raymondRender(src string, data any) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	tpl, err := raymond.Parse(src)
	if err != nil {
		return "", err
	}
	return tpl.Exec(data)
}

// BenchmarkRetryPrompt renders the retry prompt of 50 failed tests, parse
// and render per op as a retry does (capstan parses the template file at
// each retry), and render alone on a parsed template:
//
//   - capstan: internal/handlebars with capstan's retry bounds.
//   - raymond: the template as written (its values HTML-escaped, which is
//     not the text capstan sends).
//   - raymond/unescaped: the same template with triple mustaches, the
//     text capstan sends.
func BenchmarkRetryPrompt(b *testing.B) {
	data := retryData()
	want, err := capstanRender(retryTemplate, data)
	if err != nil {
		b.Fatal(err)
	}
	if got, err := raymondRender(unescaped(retryTemplate), data); err != nil || got != want {
		b.Fatalf("raymond/unescaped differs from capstan: %v\n%s\n---\n%s", err, got, want)
	}
	cases := []struct {
		name   string
		render func() (string, error)
	}{
		{"parse+render/capstan", func() (string, error) { return capstanRender(retryTemplate, data) }},
		{"parse+render/raymond", func() (string, error) { return raymondRender(retryTemplate, data) }},
		{"parse+render/raymond-unescaped", func() (string, error) { return raymondRender(unescaped(retryTemplate), data) }},
	}
	ctpl, _ := handlebars.Parse(retryTemplate, nil)
	rtpl := raymond.MustParse(retryTemplate)
	rutpl := raymond.MustParse(unescaped(retryTemplate))
	cases = append(cases, []struct {
		name   string
		render func() (string, error)
	}{
		{"render/capstan", func() (string, error) {
			return ctpl.Render(context.Background(), data, handlebars.Limits{MaxOutput: 1 << 20, MaxSteps: 200_000})
		}},
		{"render/raymond", func() (string, error) { return rtpl.Exec(data) }},
		{"render/raymond-unescaped", func() (string, error) { return rutpl.Exec(data) }},
	}...)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				out, err := c.render()
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "out-bytes")
		})
	}
}

// BenchmarkNestedLoopOverModelData is a retry template with a loop nested
// three deep over the failed tests (an author's mistake, or an agent that
// edits its own prompts), against 100 failures a model's test file can
// print: capstan stops at its step budget with an error; raymond renders
// every one of the million lines (10 MB).
func BenchmarkNestedLoopOverModelData(b *testing.B) {
	const src = "{{#each failedTests}}{{#each ../failedTests}}{{#each ../../failedTests}}{{name}}\n{{/each}}{{/each}}{{/each}}"
	var failed []any
	for i := 0; i < 100; i++ {
		failed = append(failed, map[string]any{"name": fmt.Sprintf("Test%d", i)})
	}
	data := map[string]any{"failedTests": failed}
	b.Run("capstan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := capstanRender(src, data); !errors.Is(err, handlebars.ErrLimit) {
				b.Fatalf("want the budget error, got %v", err)
			}
		}
	})
	b.Run("raymond", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			out, err := raymondRender(src, data)
			if err != nil {
				b.Fatal(err)
			}
			n = len(out)
		}
		b.ReportMetric(float64(n), "out-bytes")
	})
}
