package verdict

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

// TestRetryTemplateRenderingEmptyIsAConfigError: a retry template whose
// only text sits in an {{#if}} that this failure does not satisfy renders
// empty; that is a coded configuration error naming the template, raised
// before any model call, not an empty prompt sent to the provider.
func TestRetryTemplateRenderingEmptyIsAConfigError(t *testing.T) {
	base := t.TempDir()
	write(t, base, "steps/retry/issue/f_failed_test-failed.md", "{{#if notAParam}}Fix {{failedTests}}.{{/if}}\n")
	h := NewRetryHandler(RetryConfig{Templates: dirTemplates{base}})
	_, err := h.BuildRetryPrompt(context.Background(), retryStep, testFailure())
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeConfigurationValidation || e.File != "steps/retry/issue/f_failed_test-failed.md" || e.Hint == "" {
		t.Fatalf("err = %v", err)
	}
}
