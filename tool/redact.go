package tool

import (
	"context"
	"encoding/json"
	"fmt"
)

// redacting is a Tool whose results pass through a redaction function.
type redacting struct {
	Tool
	redact func(string) string
}

// Redacting wraps t so that the content of every result passes through
// redact (which replaces secret values) before anyone — the model, the
// journal, the transcript — sees it. So do the texts of its failures,
// which the model reads as results too: a returned error's message and a
// panic's value.
func Redacting(t Tool, redact func(string) string) Tool {
	return redacting{Tool: t, redact: redact}
}

// Run runs the wrapped tool and redacts its result, its error and a
// panic's value.
func (r redacting) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	defer func() {
		if p := recover(); p != nil {
			panic(r.redact(fmt.Sprint(p)))
		}
	}()
	res, err := r.Tool.Run(ctx, input)
	res.Content = r.redact(res.Content)
	if err != nil {
		if msg := r.redact(err.Error()); msg != err.Error() {
			err = redactedError{err: err, msg: msg}
		}
	}
	return res, err
}

// redactedError is an error whose message had secret values replaced; it
// unwraps to the original, so its code and identity are kept.
type redactedError struct {
	err error
	msg string
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
