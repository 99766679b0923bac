package event

import "github.com/capstan-dev/capstan/journal"

// Journal writes a run's events to its journal: each event is one line
// whose type is the payload's kind and whose data is the payload's JSON.
// Activity events are not written (the journal has each one's result).
// It embeds the Writer for its position, path and errors.
type Journal struct{ *journal.Writer }

// Emit implements Emitter.
func (j Journal) Emit(p Payload) { j.Append(string(p.EventKind()), p) }

// Consume implements Consumer: it writes e at e's position (the Stream's
// iteration and step), as Emit writes a payload at the Writer's.
func (j Journal) Consume(e Event) {
	j.SetPosition(e.Iteration, e.Step)
	j.Append(string(e.Kind), e.Payload)
}
