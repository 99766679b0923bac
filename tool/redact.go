package tool

import (
	"context"
	"encoding/json"
)

// redacting is a Tool whose results pass through a redaction function.
type redacting struct {
	Tool
	redact func(string) string
}

// Redacting wraps t so that the content of every result passes through
// redact (which replaces secret values) before anyone — the model, the
// journal, the transcript — sees it.
func Redacting(t Tool, redact func(string) string) Tool {
	return redacting{Tool: t, redact: redact}
}

// Run runs the wrapped tool and redacts its result.
func (r redacting) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	res, err := r.Tool.Run(ctx, input)
	res.Content = r.redact(res.Content)
	return res, err
}
