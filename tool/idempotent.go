package tool

import "context"

// Idempotent is implemented by a tool that may be run again with the same
// input without harm: when a run was killed (or its worker lost) in the
// middle of such a call, the resumed run runs it again instead of telling
// the model that it was interrupted. MCP tools are idempotent when their
// server's config says `idempotent: true`.
type Idempotent interface {
	Idempotent() bool
}

// IsIdempotent reports whether calls of t may be run again freely: t says
// so (Idempotent), or it only reads the work dir (KindRead: Read, Glob,
// Grep). Every other tool's interrupted call is not run again by the tool
// loop on its own.
func IsIdempotent(t Tool) bool {
	if t == nil {
		return false
	}
	if i, ok := t.(Idempotent); ok {
		return i.Idempotent()
	}
	return t.Kind() == KindRead
}

type idempotencyKey struct{}

// WithIdempotencyKey returns ctx carrying key, the idempotency key of one
// tool call (see IdempotencyKey).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// IdempotencyKey returns the idempotency key of the tool call ctx belongs
// to, or "" outside capstan's tool loop. The key names the run, the
// iteration and the call ("capstan:<run id>:<iteration>:<call id>") and is
// the same when the call runs again in a resumed run or on another Temporal
// worker, so a Go tool that acts on an outside system (a payment, a
// comment) can pass it on and let that system drop the repeat. Such a tool
// should also implement Idempotent, so that an interrupted call of it is
// run again rather than reported to the model.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}
