package verdict

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/internal/handlebars"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
)

// RenderedTemplate is the result of RenderTemplate.
type RenderedRetryTemplate struct {
	Text string
	// Referenced are the top-level names the template reads, sorted.
	Referenced []string
	// Declared are the params listed in the template's frontmatter, if any.
	Declared []string
}

// Bounds of a retry template's rendering: templates may be written by a
// model (an agent that edits its own prompts), so a nested loop over a
// long list stops at the budget instead of exhausting memory or time.
const (
	retryTemplateMaxOutput = 1 << 20
	retryTemplateMaxSteps  = 200_000
)

// ParseTemplate checks a retry template's syntax without rendering it. The
// error names the line and column in src (frontmatter lines included), e.g.
// "line 7:1: {{#each failedTests}} is never closed".
func ParseRetryTemplate(src string) error {
	_, _, err := parseRetryTemplate(src)
	return err
}

func parseRetryTemplate(src string) (*handlebars.Template, []string, error) {
	body, declared, skipped, err := splitFrontmatter(src)
	if err != nil {
		return nil, nil, err
	}
	tpl, err := handlebars.Parse(body, nil)
	if err != nil {
		var se *handlebars.SyntaxError
		if errors.As(err, &se) && skipped > 0 {
			return nil, nil, &handlebars.SyntaxError{Line: se.Line + skipped, Col: se.Col, Msg: se.Msg}
		}
		return nil, nil, err
	}
	return tpl, declared, nil
}

// RenderTemplate renders a Handlebars retry template with params: {{x}},
// {{a.b}}, {{#each list}}…{{this.name}}…{{/each}}, {{#if x}}…{{else}}…{{/if}}
// (the subset internal/handlebars documents). Unlike Handlebars' default,
// output is never HTML-escaped: test output with <, & and quotes reaches
// the model verbatim. Lists print as comma-separated values, objects as
// JSON. A leading YAML frontmatter ("---" … "---") is removed; its "params"
// list is returned in Declared. Rendering is bounded in steps and output.
func RenderRetryTemplate(src string, params map[string]any) (RenderedRetryTemplate, error) {
	return renderRetryTemplate(context.Background(), src, params)
}

func renderRetryTemplate(ctx context.Context, src string, params map[string]any) (RenderedRetryTemplate, error) {
	tpl, declared, err := parseRetryTemplate(src)
	if err != nil {
		return RenderedRetryTemplate{}, err
	}
	data, _ := jsonvalue.Normalize(params).(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	out, err := tpl.Render(ctx, data, handlebars.Limits{MaxOutput: retryTemplateMaxOutput, MaxSteps: retryTemplateMaxSteps})
	if err != nil {
		return RenderedRetryTemplate{}, err
	}
	r := RenderedRetryTemplate{Text: strings.ToValidUTF8(out, "\uFFFD"), Declared: declared, Referenced: tpl.Refs()}
	sort.Strings(r.Referenced)
	return r, nil
}

// splitFrontmatter removes a leading frontmatter block (the rule of
// package frontmatter) and reads its params list; skippedLines is the
// number of lines before the body. A "---" first line that nothing closes
// is text of the prompt (a Markdown rule), not an error: the retry prompt
// is sent as written.
func splitFrontmatter(src string) (body string, params []string, skippedLines int, err error) {
	b, err := yamlsafe.SplitFrontmatter(src)
	if errors.Is(err, yamlsafe.ErrUnclosedFrontmatter) {
		return src, nil, 0, nil
	}
	if !b.Present {
		return b.Body, nil, 0, nil
	}
	var fm struct {
		Params []string `yaml:"params"`
	}
	if err := yamlsafe.Unmarshal([]byte(b.YAML), &fm); err != nil {
		return "", nil, 0, fmt.Errorf("frontmatter: %v", err)
	}
	return b.Body, fm.Params, b.BodyLine - 1, nil
}
