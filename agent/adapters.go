package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"

	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/prompt"
	"github.com/capstan-dev/capstan/schema"
)

// retryTemplates adapts the prompt resolver to completion's
// RetryTemplateSource.
type retryTemplates struct{ r *prompt.Resolver }

func (t retryTemplates) ResolveRetry(ctx context.Context, c1, c2, c3, edition, adaptation string) (string, bool, error) {
	rt, err := t.r.ResolveRetry(ctx, c1, c2, c3, edition, adaptation)
	if err != nil {
		return "", false, err
	}
	return rt.Text, rt.Found, nil
}

// schemas resolves outputSchemaRef and file-validator schema references
// under the agent's schemas/ folder, compiling each once.
type schemas struct {
	resolver *schema.Resolver
	mu       sync.Mutex
	compiled map[config.SchemaRef]*compiledSchema
}

type compiledSchema struct {
	raw       json.RawMessage
	validator *schema.Validator
}

func newSchemas(agentDir string) *schemas {
	return &schemas{resolver: schema.NewResolver(filepath.Join(agentDir, "schemas")), compiled: map[config.SchemaRef]*compiledSchema{}}
}

// get resolves and compiles ref.
func (s *schemas) get(ref config.SchemaRef) (*compiledSchema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.compiled[ref]; ok {
		return c, nil
	}
	raw, err := s.resolver.Resolve(ref.File, ref.Schema)
	if err != nil {
		return nil, err
	}
	v, err := schema.Compile(raw)
	if err != nil {
		return nil, err
	}
	c := &compiledSchema{raw: raw, validator: v}
	s.compiled[ref] = c
	return c, nil
}

// Schema implements completion.SchemaSource.
func (s *schemas) Schema(ref config.SchemaRef) (completion.SchemaValidator, error) {
	c, err := s.get(ref)
	if err != nil {
		return nil, err
	}
	return c.validator, nil
}

// extractJSON recovers a JSON value from prose for the FormatValidator.
func extractJSON(text string) (any, error) {
	raw, ok := schema.ExtractJSON(text)
	if !ok {
		return nil, errNoJSON
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

type noJSONError struct{}

func (noJSONError) Error() string { return "the response contains no JSON object" }

var errNoJSON error = noJSONError{}
