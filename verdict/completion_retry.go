package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/handlebars"
	"github.com/capstan-dev/capstan/verify"
)

// RetryTemplateSource finds retry prompt templates by C3L coordinates:
// {c1}/{c2}/{c3}/f_{edition}_{adaptation}.md, or f_{edition}.md when
// adaptation is "". found is false when the file does not exist; text is
// the raw (unrendered) template. The prompt package implements it.
type RetryTemplateSource interface {
	ResolveRetry(ctx context.Context, c1, c2, c3, edition, adaptation string) (text string, found bool, err error)
}

// RetryConfig configures a RetryHandler.
type RetryConfig struct {
	// C1 is the registry's c1 (default "steps").
	C1 string
	// Patterns are the registry's completionPatterns (built-ins fill the rest).
	Patterns map[string]agentdir.CompletionPattern
	// Templates finds C3L retry templates; nil means only the built-in
	// generic prompt is used.
	Templates RetryTemplateSource
}

// RetryHandler turns a failed validation
// into the prompt for that failure pattern.
type RetryHandler struct {
	cfg RetryConfig
}

// NewRetryHandler returns a RetryHandler.
func NewRetryHandler(cfg RetryConfig) *RetryHandler {
	if cfg.C1 == "" {
		cfg.C1 = "steps"
	}
	return &RetryHandler{cfg: cfg}
}

// RetryPrompt is a built retry prompt.
type RetryPrompt struct {
	Text    string `json:"text"`
	Pattern string `json:"pattern"`
	// Source is the C3L path of the template used, or "builtin".
	Source string `json:"source"`
	// Warnings name template params the pattern did not provide (they
	// rendered empty) and similar non-fatal problems.
	Warnings []string `json:"warnings,omitempty"`
}

// SourceBuiltin is RetryPrompt.Source when no template file was found.
const SourceBuiltin = "builtin"

// BuildRetryPrompt resolves the retry prompt for vr's pattern: the C3L
// template {c1}/{step.c2}/{step.c3}/f_{edition}_{adaptation}.md, then
// f_{edition}.md, then a built-in prompt that states the pattern, the
// validator and every param. Templates are rendered with the params (plus
// "pattern", "validator", "description" and "stepId" when not params).
func (h *RetryHandler) BuildRetryPrompt(ctx context.Context, step agentdir.Step, vr event.ValidationResult) (RetryPrompt, error) {
	if vr.Valid {
		return RetryPrompt{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"no retry prompt for a passing validation")
	}
	pat, ok := verify.LookupPattern(h.cfg.Patterns, vr.Pattern)
	if !ok {
		return RetryPrompt{}, &agenterr.Error{Code: agenterr.CodeCompletion, Layer: agenterr.LayerCompletion,
			Message: fmt.Sprintf("validator %q failed with unknown pattern %q", vr.Validator, vr.Pattern),
			File:    agentdir.DefaultRegistryFile, Pointer: "/completionPatterns/" + vr.Pattern,
			Hint: "declare it under completionPatterns or use a built-in: " + strings.Join(verify.BuiltinPatternNames(), ", ")}
	}
	edition := pat.Edition
	if edition == "" {
		edition = "failed"
	}
	data := make(map[string]any, len(vr.Params)+4)
	for k, v := range vr.Params {
		data[k] = v
	}
	for k, v := range map[string]any{"pattern": vr.Pattern, "validator": vr.Validator, "description": pat.Description, "stepId": step.StepID} {
		if _, set := data[k]; !set {
			data[k] = v
		}
	}
	if h.cfg.Templates != nil {
		tries := []string{pat.Adaptation, ""}
		if pat.Adaptation == "" {
			tries = tries[1:]
		}
		for _, adaptation := range tries {
			text, found, err := h.cfg.Templates.ResolveRetry(ctx, h.cfg.C1, step.C2, step.C3, edition, adaptation)
			if err != nil {
				return RetryPrompt{}, err
			}
			if !found {
				continue
			}
			src := c3lPath(h.cfg.C1, step.C2, step.C3, edition, adaptation)
			r, err := renderRetryTemplate(ctx, text, data)
			if err != nil && ctx.Err() != nil {
				return RetryPrompt{}, agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerCompletion, false, "retry prompt canceled")
			}
			if err != nil {
				hint := "fix the Handlebars syntax ({{param}}, {{#each list}}…{{/each}}, {{#if x}}…{{else}}…{{/if}})"
				if errors.Is(err, handlebars.ErrLimit) {
					hint = "the template renders too much: loop over fewer lists, or nest fewer {{#each}} blocks"
				}
				return RetryPrompt{}, &agenterr.Error{Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
					Message: "retry template: " + err.Error(), File: src, Hint: hint, Err: err}
			}
			if strings.TrimSpace(r.Text) == "" {
				// An empty prompt would reach the provider as a request
				// error; it is the template's fault, so say so here.
				return RetryPrompt{}, &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerCompletion,
					Message: fmt.Sprintf("retry template for failure pattern %q renders empty with the params of this failure", vr.Pattern), File: src,
					Hint: "give the template text outside {{#if}}/{{#each}} blocks, or an {{else}} branch, so every failure gets a prompt"}
			}
			return RetryPrompt{Text: r.Text, Pattern: vr.Pattern, Source: src, Warnings: templateWarnings(r, data, vr.Pattern, src)}, nil
		}
	}
	return RetryPrompt{Text: GenericRetryPrompt(vr, pat), Pattern: vr.Pattern, Source: SourceBuiltin}, nil
}

func templateWarnings(r RenderedRetryTemplate, data map[string]any, pattern, src string) []string {
	var w []string
	for _, ref := range r.Referenced {
		if _, ok := data[ref]; !ok {
			w = append(w, fmt.Sprintf("%s: {{%s}} is not a param of pattern %q; it rendered empty", src, ref, pattern))
		}
	}
	for _, d := range r.Declared {
		if _, ok := data[d]; !ok {
			w = append(w, fmt.Sprintf("%s: frontmatter param %q is not provided by pattern %q", src, d, pattern))
		}
	}
	return w
}

func c3lPath(c1, c2, c3, edition, adaptation string) string {
	name := "f_" + edition
	if adaptation != "" {
		name += "_" + adaptation
	}
	return path.Join(c1, c2, c3, name+".md")
}

// GenericRetryPrompt is the built-in retry prompt used when no template
// exists: it names the failure, the validator and shows every param, so the
// model gets the facts even without a prompt file.
func GenericRetryPrompt(vr event.ValidationResult, pat agentdir.CompletionPattern) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Completion check failed: %s\n\n", vr.Pattern)
	if pat.Description != "" {
		d := upperFirst(strings.TrimSpace(pat.Description))
		if r, _ := utf8.DecodeLastRuneInString(d); !unicode.IsPunct(r) {
			d += "."
		}
		fmt.Fprintf(&b, "%s\n\n", d)
	}
	fmt.Fprintf(&b, "You declared the task complete, but the check `%s` did not pass. Fix only this problem, then declare completion again.\n", vr.Validator)
	keys := make([]string, 0, len(vr.Params))
	for k := range vr.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n", k, describeParam(vr.Params[k]))
	}
	if len(keys) == 0 && vr.Output != nil {
		if out := strings.TrimSpace(verify.JoinedOutput(*vr.Output)); out != "" {
			fmt.Fprintf(&b, "\n### output\n\n```\n%s\n```\n", out)
		}
	}
	return b.String()
}

// upperFirst upper-cases the first letter of s (a whole rune: descriptions
// are often not ASCII).
func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// describeParam renders one param for the generic prompt.
func describeParam(v any) string {
	switch x := v.(type) {
	case string:
		if strings.TrimSpace(x) == "" {
			return "(empty)"
		}
		if strings.Contains(x, "\n") || len(x) > 120 {
			return "```\n" + strings.TrimRight(x, "\n") + "\n```"
		}
		return x
	case []string:
		if len(x) == 0 {
			return "(none)"
		}
		return "- " + strings.Join(x, "\n- ")
	case []verify.TestFailure:
		if len(x) == 0 {
			return "(none)"
		}
		var b strings.Builder
		for _, t := range x {
			fmt.Fprintf(&b, "- `%s`", t.Name)
			if t.Error != "" {
				fmt.Fprintf(&b, ":\n  ```\n  %s\n  ```", strings.ReplaceAll(t.Error, "\n", "\n  "))
			}
			b.WriteString("\n")
		}
		return strings.TrimRight(b.String(), "\n")
	case []verify.TypeError:
		if len(x) == 0 {
			return "(none)"
		}
		var lines []string
		for _, e := range x {
			code := ""
			if e.Code != "" {
				code = e.Code + ": "
			}
			lines = append(lines, fmt.Sprintf("- %s:%d:%d: %s%s", e.File, e.Line, e.Column, code, e.Message))
		}
		return strings.Join(lines, "\n")
	case []verify.LintError:
		if len(x) == 0 {
			return "(none)"
		}
		var lines []string
		for _, e := range x {
			rule := ""
			if e.Rule != "" {
				rule = " (" + e.Rule + ")"
			}
			lines = append(lines, fmt.Sprintf("- %s:%d:%d: %s%s", e.File, e.Line, e.Column, e.Message, rule))
		}
		return strings.Join(lines, "\n")
	default:
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if enc.Encode(v) != nil {
			return fmt.Sprint(v)
		}
		s := strings.TrimRight(b.String(), "\n")
		if strings.Contains(s, "\n") {
			return "```json\n" + s + "\n```"
		}
		return s
	}
}

// Failure actions of a step's onFailure.
const (
	OnFailureRetry = "retry"
	OnFailureAbort = "abort"
	OnFailureSkip  = "skip"
)

// DefaultMaxAttempts is onFailure.maxAttempts when unset.
const DefaultMaxAttempts = 3

// Decision is what to do after a failed completion validation.
type RetryDecision struct {
	// Action is retry (send the retry prompt), abort (end the run, not
	// completed) or skip (accept the step despite the failure).
	Action string `json:"action"`
	// Attempt is the number of failed attempts so far (1-based).
	Attempt int `json:"attempt"`
	// MaxAttempts is the retry budget.
	MaxAttempts int `json:"maxAttempts"`
}

// RetryBudget applies a step's onFailure: after each failed
// validation, Next says whether to retry, abort or skip. With action retry
// and maxAttempts N, a step gets N completion attempts in all: failures 1 …
// N-1 retry, failure N exhausts the budget (VALIDATION_EXHAUSTED).
type RetryBudget struct {
	action   string
	max      int
	failures int
}

// NewRetryBudget returns the budget of onFailure (nil = retry, 3 attempts).
// An unknown action is a CONFIG_INVALID error.
func NewRetryBudget(onFailure *agentdir.OnFailure) (*RetryBudget, error) {
	b := &RetryBudget{action: OnFailureRetry, max: DefaultMaxAttempts}
	if onFailure != nil {
		if onFailure.Action != "" {
			b.action = onFailure.Action
		}
		if onFailure.MaxAttempts > 0 {
			b.max = onFailure.MaxAttempts
		}
	}
	switch b.action {
	case OnFailureRetry, OnFailureAbort, OnFailureSkip:
		return b, nil
	}
	return nil, &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerConfiguration,
		Message: fmt.Sprintf("onFailure action %q is not retry, abort or skip", b.action),
		File:    agentdir.DefaultRegistryFile, Hint: `use "retry", "abort" or "skip"`}
}

// Next records one failed validation and decides. The error is
// VALIDATION_EXHAUSTED when retries are used up and VALIDATION_ABORTED for
// action abort; both mean the run ends without completing.
func (b *RetryBudget) Next(vr event.ValidationResult) (RetryDecision, error) {
	b.failures++
	d := RetryDecision{Action: b.action, Attempt: b.failures, MaxAttempts: b.max}
	switch b.action {
	case OnFailureAbort:
		return d, agenterr.New(agenterr.CodeValidationAborted, agenterr.LayerCompletion, false,
			"completion check %q failed with pattern %q and onFailure is abort", vr.Validator, vr.Pattern)
	case OnFailureSkip:
		return d, nil
	}
	if b.failures >= b.max {
		attempts := "attempts"
		if b.failures == 1 {
			attempts = "attempt"
		}
		return d, agenterr.New(agenterr.CodeValidationExhausted, agenterr.LayerCompletion, false,
			"completion check %q still fails (pattern %q) after %d %s", vr.Validator, vr.Pattern, b.failures, attempts)
	}
	return d, nil
}

// Reset clears the failure count (call after a passing validation or when
// the step changes).
func (b *RetryBudget) Reset() { b.failures = 0 }

// Failures is the number of failed validations recorded since the last Reset.
func (b *RetryBudget) Failures() int { return b.failures }
