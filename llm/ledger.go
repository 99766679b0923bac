package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/tool"
)

// Ledger is the tool-effect ledger of a run: it makes the tool loop's work
// durable across a kill. Every model turn is journaled with its answer
// (model.turn with query and message), every tool call as an intent
// (tool.intent) before it runs and as its result (tool.call) after. When an
// iteration runs again after it was cut — a resumed run, an iteration
// retried on Temporal, on the same worker or another one — a query with
// the same prompt continues from that record instead of starting over:
//
//   - a model turn the earlier attempt recorded is taken from the record,
//     not asked (and billed) again;
//   - a call with a recorded result is answered with that result and not
//     run again;
//   - a call with an intent and no result (the kill came while it ran) is
//     not run again unless its tool is idempotent (tool.IsIdempotent): the
//     model is told that the earlier attempt was interrupted and what the
//     work dir shows now (Describe), and decides.
//
// A Ledger is safe for concurrent use. Begin tells it where the run is.
type Ledger struct {
	// RunID names the run in idempotency keys.
	RunID string
	// BeforeEffect, when set, is called once per iteration attempt before
	// its first call of a tool that is not idempotent (the agent records
	// the work dir there, for Describe).
	BeforeEffect func(ctx context.Context, iteration int)
	// Describe, when set, says what the work dir shows now compared with
	// the start of the iteration; it ends the notice of an interrupted
	// call.
	Describe func(ctx context.Context, iteration int) string
	// AfterEffect, when set, is called after each call of a tool that is
	// not idempotent, before its result is journaled: a driver whose work
	// dir lives elsewhere (a Temporal worker's checkout) saves it there, so
	// that every journaled result has its effects in the saved work dir.
	// Calls of a tool that edits files (tool.KindEdit) before the
	// iteration's first call of any other tool that is not idempotent are
	// not saved: an attempt that finds no saved work dir (Restored) makes
	// them again, in order, on the state the iteration began from.
	AfterEffect func(ctx context.Context, iteration int)
	// Restored says that the work dir was put back to the state the
	// iteration began from after the earlier attempts (a Temporal worker
	// checked out the run's last commit): their edits of it are gone. A
	// recorded call of a tool that edits files (tool.KindEdit) is then run
	// again, and another recorded call is answered with a note saying so.
	Restored bool

	mu        sync.Mutex
	iteration int
	prior     map[string]*ledgerQuery // what earlier attempts of the iteration recorded, by query
	cur       []keyedQuery            // what this attempt recorded, by query (an attempt asks a few)
	effect    bool                    // BeforeEffect ran in this attempt
	// saving: a call of a tool that is not idempotent and not KindEdit was
	// started in this iteration (by any attempt), or a call whose kind the
	// record does not tell; from then on every such call is saved
	// (AfterEffect).
	saving bool
}

// TurnReplayer is implemented by a Model that keeps its own place in a
// conversation (the script provider): the tool loop tells it about every
// turn it answered from the Ledger instead of asking it.
type TurnReplayer interface {
	TurnReplayed(resp *Response)
}

// ledgerQuery is the record of one query of an iteration attempt.
type ledgerQuery struct {
	turns map[int]*Response
	calls map[callKey]*ledgerCall
}

// keyedQuery is a query's record with its key (the digest of its prompt).
type keyedQuery struct {
	key string
	q   *ledgerQuery
}

type callKey struct {
	turn int
	id   string
}

type ledgerCall struct {
	intent *event.ToolIntentEvent
	at     time.Time
	result *event.ToolUse
}

func newLedgerQuery() *ledgerQuery {
	// The maps are made by the first turn and the first call recorded: a
	// query parked in its first model call has neither.
	return &ledgerQuery{}
}

func (q *ledgerQuery) call(k callKey) *ledgerCall {
	c := q.calls[k]
	if c == nil {
		c = &ledgerCall{}
		if q.calls == nil {
			q.calls = map[callKey]*ledgerCall{}
		}
		q.calls[k] = c
	}
	return c
}

// setTurn records r as the answer of turn.
func (q *ledgerQuery) setTurn(turn int, r *Response) {
	if q.turns == nil {
		q.turns = map[int]*Response{}
	}
	q.turns[turn] = r
}

// merge takes what a later attempt recorded into q.
func (q *ledgerQuery) merge(o *ledgerQuery) {
	for t, r := range o.turns {
		q.setTurn(t, r)
	}
	for k, c := range o.calls {
		d := q.call(k)
		if c.intent != nil {
			d.intent, d.at = c.intent, c.at
		}
		if c.result != nil {
			d.result = c.result
		}
	}
}

// Begin tells the ledger that an attempt of iteration n starts. When it is
// the iteration the ledger last saw, what the earlier attempts recorded is
// kept for the queries of this one; another iteration starts afresh.
func (l *Ledger) Begin(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n == l.iteration {
		if l.prior == nil {
			l.prior = map[string]*ledgerQuery{}
		}
		for _, c := range l.cur {
			if p := l.prior[c.key]; p != nil {
				p.merge(c.q)
			} else {
				l.prior[c.key] = c.q
			}
		}
	} else {
		l.prior, l.saving = nil, false
	}
	l.iteration, l.cur, l.effect = n, nil, false
}

// Seed loads what the journal recorded of iteration n's earlier attempts
// (events of any attempt, in journal order; events of other iterations
// are skipped), for a run resumed in iteration n.
func (l *Ledger) Seed(n int, events []journal.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.iteration, l.prior, l.cur, l.effect, l.saving = n, map[string]*ledgerQuery{}, nil, false, false
	query := func(k string) *ledgerQuery {
		q := l.prior[k]
		if q == nil {
			q = newLedgerQuery()
			l.prior[k] = q
		}
		return q
	}
	type place struct {
		query string
		turn  int
	}
	byID := map[string]place{}
	for _, ev := range events {
		if ev.Iteration != n {
			continue
		}
		switch ev.Type {
		case journal.ModelTurn:
			var mt event.ModelTurnEvent
			if json.Unmarshal(ev.Data, &mt) != nil || mt.Query == "" || mt.Message == nil {
				continue
			}
			query(mt.Query).setTurn(mt.Turn, &Response{Message: *mt.Message, StopReason: mt.StopReason,
				StructuredOutput: mt.StructuredOutput})
		case journal.ToolIntent:
			var in event.ToolIntentEvent
			if json.Unmarshal(ev.Data, &in) != nil || in.Query == "" {
				continue
			}
			c := query(in.Query).call(callKey{in.Turn, in.ID})
			c.intent, c.at, c.result = &in, ev.Time, nil
			// The record does not say which tools edit files.
			l.saving = l.saving || !in.Idempotent
			byID[in.ID] = place{in.Query, in.Turn}
		case journal.ToolCall:
			var u event.ToolUse
			if json.Unmarshal(ev.Data, &u) != nil {
				continue
			}
			if p, ok := byID[u.ID]; ok {
				query(p.query).call(callKey{p.turn, u.ID}).result = &u
			}
		}
	}
}

// open returns the ledger's view of a query with prompt: what earlier
// attempts recorded of it (taken, so a second query with the same prompt
// in this attempt starts afresh) and this attempt's record.
func (l *Ledger) open(prompt string) *ledgerRun {
	key := digest(prompt)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &ledgerRun{l: l, key: key, iteration: l.iteration, prior: l.prior[key]}
	delete(l.prior, key)
	i := slices.IndexFunc(l.cur, func(c keyedQuery) bool { return c.key == key })
	if i < 0 {
		i = len(l.cur)
		l.cur = append(l.cur, keyedQuery{key, newLedgerQuery()})
	}
	r.cur = l.cur[i].q
	if r.prior != nil {
		// What this attempt does not redo stays known to a later one.
		r.cur.merge(r.prior)
	}
	return r
}

// ledgerRun is one query's use of the ledger.
type ledgerRun struct {
	l         *Ledger
	key       string
	iteration int
	prior     *ledgerQuery
	cur       *ledgerQuery
}

// recorded returns the answer an earlier attempt recorded for turn.
func (r *ledgerRun) recorded(turn int) *Response {
	if r == nil || r.prior == nil {
		return nil
	}
	return r.prior.turns[turn]
}

// record keeps this attempt's answer of turn.
func (r *ledgerRun) record(turn int, resp *Response) {
	r.l.mu.Lock()
	r.cur.setTurn(turn, &Response{Message: resp.Message, StopReason: resp.StopReason, StructuredOutput: resp.StructuredOutput})
	r.l.mu.Unlock()
}

// run handles one call of turn: answered from the record of an earlier
// attempt, reported as interrupted, or journaled as an intent and run.
func (r *ledgerRun) run(ctx context.Context, turn int, replayed bool, call tool.Call, events event.Emitter, next tool.Handler) tool.Outcome {
	k := callKey{turn, call.ID}
	idem := tool.IsIdempotent(call.Tool)
	if replayed && r.prior != nil {
		if c := r.prior.calls[k]; c != nil {
			edits := call.Tool != nil && call.Tool.Kind() == tool.KindEdit
			switch {
			case c.result != nil && r.l.Restored && edits:
				// Its edit was undone with the work dir: make it again.
			case c.result != nil:
				out := c.result.Output
				if r.l.Restored {
					out += "\n\n[capstan: this result is from an earlier attempt of this iteration on a worker that was lost; " +
						"the work dir was restored to the state this iteration began from, so what this call changed inside the work dir is gone " +
						"(what it did outside the work dir stays done)]"
				}
				return tool.Outcome{Result: tool.Result{Content: out, IsError: c.result.IsError}, Replayed: true}
			case c.intent != nil && !idem:
				out := tool.Outcome{Result: tool.Result{Content: r.interrupted(ctx, call, c.at), IsError: true}}
				r.keep(k, nil, &event.ToolUse{ID: call.ID, Name: call.Name, Input: call.Input, Output: out.Content, IsError: true})
				return out
			}
		}
	}
	save := false
	if !idem {
		r.beforeEffect(ctx)
		save = r.saves(call)
	}
	in := &event.ToolIntentEvent{ID: call.ID, Name: call.Name, InputDigest: digest(string(call.Input)), Query: r.key, Turn: turn, Idempotent: idem}
	r.keep(k, in, nil)
	events.Emit(in)
	out := next(tool.WithIdempotencyKey(ctx, r.idempotencyKey(call.ID)), call)
	if save && r.l.AfterEffect != nil {
		r.l.AfterEffect(ctx, r.iteration)
	}
	r.keep(k, nil, &event.ToolUse{ID: call.ID, Name: call.Name, Input: call.Input, Output: out.Content, IsError: out.IsError})
	return out
}

// keep records an intent or a result of this attempt.
func (r *ledgerRun) keep(k callKey, in *event.ToolIntentEvent, res *event.ToolUse) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	c := r.cur.call(k)
	if in != nil {
		c.intent, c.at, c.result = in, time.Now(), nil
	}
	if res != nil {
		c.result = res
	}
}

// beforeEffect calls the ledger's BeforeEffect once per attempt.
func (r *ledgerRun) beforeEffect(ctx context.Context) {
	r.l.mu.Lock()
	first := !r.l.effect
	r.l.effect = true
	r.l.mu.Unlock()
	if first && r.l.BeforeEffect != nil {
		r.l.BeforeEffect(ctx, r.iteration)
	}
}

// saves reports whether the call's effect is saved after it (AfterEffect),
// and starts saving from the iteration's first call of a tool that is not
// idempotent and does not only edit files.
func (r *ledgerRun) saves(call tool.Call) bool {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if call.Tool == nil || call.Tool.Kind() != tool.KindEdit {
		r.l.saving = true
	}
	return r.l.saving
}

// idempotencyKey is the key of call id in this query (tool.IdempotencyKey).
func (r *ledgerRun) idempotencyKey(id string) string {
	return "capstan:" + r.l.RunID + ":" + strconv.Itoa(r.iteration) + ":" + id
}

// interrupted is what the model reads for a call the earlier attempt
// started and did not finish.
func (r *ledgerRun) interrupted(ctx context.Context, call tool.Call, at time.Time) string {
	when := ""
	if !at.IsZero() {
		when = " (started at " + at.UTC().Format(time.RFC3339) + ")"
	}
	msg := fmt.Sprintf("not run again: an earlier attempt of this %s call%s was interrupted before it finished — "+
		"the run was killed or lost its worker — so it may have taken effect in full, in part or not at all. "+
		"Check the state it acts on before you decide to make the call again.", call.Name, when)
	if r.l.Describe != nil {
		if d := r.l.Describe(ctx, r.iteration); d != "" {
			msg += "\n\n" + d
		}
	}
	return msg
}

// digest is the ledger's digest of a prompt or an input: the first 128
// bits of its SHA-256, in hex.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
