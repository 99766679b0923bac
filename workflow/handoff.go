package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/schema"
)

// HandoffEmitter applies a workflow's handoffs: after an agent ends with
// an outcome, each matching handoff's payload is resolved, checked
// against its schemas, written as a JSON artifact under the work dir, and
// (persistPayloadTo subjectStore) kept for the issue's later dispatches.
type HandoffEmitter struct {
	Workflow *Workflow
	// WorkDir is where artifact paths and schema files are relative to.
	WorkDir string
	// StoreDir keeps persisted payloads (<StoreDir>/<issue>/
	// workflow-payload.<workflow id>.json); "" keeps them in memory only.
	StoreDir string
	Now      func() time.Time
	Events   event.Emitter // the handoffs applied (nil = none journaled)
}

// Emit runs the handoffs of agent's outcome and returns the payload to
// pass to the issue's next dispatches (nil when none persisted).
func (h *HandoffEmitter) Emit(ctx context.Context, issue int, agent, outcome string, result map[string]any) (map[string]any, error) {
	var persisted map[string]any
	for _, ho := range h.Workflow.Handoffs {
		if ho.FromAgent != agent || ho.Outcome != outcome {
			continue
		}
		payload, err := h.resolve(ho, result)
		if err != nil {
			return nil, err
		}
		if err := h.check(ho, payload); err != nil {
			return nil, err
		}
		rel := renderPayload(ho.EmitPath, payload)
		path, err := h.inWorkDir(rel)
		if err != nil {
			return nil, fmt.Errorf("handoff %s: emit.path %q: %w", ho.ID, rel, err)
		}
		b, _ := json.MarshalIndent(payload, "", "  ")
		if err := writeAtomic(path, b); err != nil {
			return nil, fmt.Errorf("handoff %s: write %s: %w", ho.ID, path, err)
		}
		if ho.PersistPayloadTo == "subjectStore" {
			persisted = payload
			if h.StoreDir != "" {
				p := filepath.Join(h.StoreDir, fmt.Sprint(issue), "workflow-payload."+h.Workflow.ID()+".json")
				if err := writeAtomic(p, b); err != nil {
					return nil, fmt.Errorf("handoff %s: persist payload: %w", ho.ID, err)
				}
			}
		}
		if h.Events != nil {
			h.Events.Emit(event.WorkflowHandoffEvent{Issue: issue, Handoff: ho.ID, Artifact: rel, Persisted: ho.PersistPayloadTo == "subjectStore"})
		}
	}
	return persisted, nil
}

func (h *HandoffEmitter) inWorkDir(rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("must be relative to the work dir")
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("leaves the work dir")
	}
	return filepath.Join(h.WorkDir, clean), nil
}

func (h *HandoffEmitter) resolve(ho Handoff, result map[string]any) (map[string]any, error) {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	payload := map[string]any{}
	var templated []PayloadField
	for _, f := range ho.PayloadFrom {
		e := f.Expr
		switch {
		case strings.Contains(e, "${payload."):
			templated = append(templated, f)
		case len(e) >= 2 && strings.HasPrefix(e, "'") && strings.HasSuffix(e, "'"):
			payload[f.Key] = e[1 : len(e)-1]
		case e == "$.workflow.context.now":
			payload[f.Key] = now().UTC().Format(time.RFC3339Nano)
		case e == "$.workflow.id":
			payload[f.Key] = h.Workflow.ID()
		case e == "$.agent.result":
			payload[f.Key] = result
		case strings.HasPrefix(e, "$.agent.result."):
			v, ok := walk(result, strings.TrimPrefix(e, "$.agent.result."))
			if !ok {
				return nil, fmt.Errorf("handoff %s: payloadFrom %s: %s is not in the agent's handoff values (its closure step's structuredGate.handoffFields)", ho.ID, f.Key, e)
			}
			payload[f.Key] = v
		default:
			return nil, fmt.Errorf("handoff %s: payloadFrom %s: cannot read %q", ho.ID, f.Key, e)
		}
	}
	for _, f := range templated {
		payload[f.Key] = renderPayload(f.Expr, payload)
	}
	return payload, nil
}

// walk follows a dot path through decoded JSON.
func walk(v any, path string) (any, bool) {
	for _, seg := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return v, true
}

// renderPayload fills ${payload.KEY} from the payload.
func renderPayload(t string, payload map[string]any) string {
	return substitute(t, "${payload.", func(key string) (string, bool) {
		v, ok := payload[key]
		if !ok {
			return "", false
		}
		return valueText(v), true
	})
}

func (h *HandoffEmitter) check(ho Handoff, payload map[string]any) error {
	var files []string
	if ho.SchemaRef != "" {
		p := filepath.Join(h.WorkDir, "agents", "common", "schemas", ho.SchemaRef+".json")
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		}
	}
	if ref := h.Workflow.PayloadSchemaRef; ref != "" && ho.PersistPayloadTo == "subjectStore" {
		p := filepath.Join(h.WorkDir, ref)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("handoff %s: payloadSchema %s: %w", ho.ID, ref, err)
		}
		files = append(files, p)
	}
	raw, _ := json.Marshal(payload)
	var inst any
	_ = json.Unmarshal(raw, &inst)
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("handoff %s: %w", ho.ID, err)
		}
		s, err := schema.CompileSource(schema.Source{Raw: doc, URL: "file://" + f, Loader: readFileURL})
		if err != nil {
			return fmt.Errorf("handoff %s: schema %s: %w", ho.ID, f, err)
		}
		if err := s.Check(inst); err != nil {
			return fmt.Errorf("handoff %s: the payload does not satisfy %s: %w", ho.ID, f, err)
		}
	}
	return nil
}

func readFileURL(u string) ([]byte, error) {
	return os.ReadFile(strings.TrimPrefix(u, "file://"))
}
