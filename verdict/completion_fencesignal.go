package verdict

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/schema"
)

// FenceSignal completes when the model's own text of the iteration holds a
// closed fenced block tagged SignalType (```<SignalType> or
// ~~~<SignalType>, a JSON object inside) that carries the required fields: every name of Names present (not
// null), every key of Values equal to its value (agent.json completion type
// "signal", climpt's verdict detect:structured). Only assistant responses
// count, as for Keyword: a block in a file the model read is not a
// declaration. A block whose JSON does not parse, or lacks a required
// field, does not complete the run.
type FenceSignal struct {
	SignalType string
	Names      []string
	Values     map[string]any
	handlerState
}

// Check implements Handler.
func (h *FenceSignal) Check(_ context.Context, c CompletionContext) (event.CompletionResult, error) {
	if err := checkContext(c, true); err != nil {
		return event.CompletionResult{}, err
	}
	if h.SignalType == "" {
		return event.CompletionResult{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"signal completion needs a non-empty signalType")
	}
	r := event.CompletionResult{}
	for _, text := range c.Summary.AssistantResponses {
		for _, block := range schema.CodeBlocks(text) {
			if !block.Closed || block.Info != h.SignalType {
				continue
			}
			var obj map[string]any
			if json.Unmarshal([]byte(block.Body), &obj) != nil || obj == nil {
				continue
			}
			if missing := h.missing(obj); missing != "" {
				r = event.CompletionResult{Declared: true, Reason: fmt.Sprintf("signal %q lacks %s", h.SignalType, missing)}
				continue
			}
			return h.set(event.CompletionResult{Complete: true, Declared: true, Reason: fmt.Sprintf("signal %q with its required fields found in the response", h.SignalType)}), nil
		}
	}
	if r.Declared {
		// A declaration that does not hold is not a completion; the
		// reason stays for the journal.
		h.set(event.CompletionResult{})
		return r, nil
	}
	return h.set(r), nil
}

// missing describes the first required field obj lacks, or "".
func (h *FenceSignal) missing(obj map[string]any) string {
	for _, n := range h.Names {
		if v, ok := obj[n]; !ok || v == nil {
			return fmt.Sprintf("field %q", n)
		}
	}
	keys := make([]string, 0, len(h.Values))
	for k := range h.Values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !reflect.DeepEqual(obj[k], h.Values[k]) {
			return fmt.Sprintf("field %q = %v", k, h.Values[k])
		}
	}
	return ""
}
