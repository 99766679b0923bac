package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/handlebars"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/schema"
)

// Contract is the part of a stage's definition shared by the model and
// agent stage kinds.
type Contract struct {
	ID       string
	Pre      []string
	Post     []string
	Optional []string
	// Keys declares the types of keys; postcondition types shape the
	// output schema of model and agent stages.
	Keys []KeySpec
}

// outputStage is the shared machinery of stages whose result is one JSON
// object holding their postconditions: property names are the
// postconditions without their namespace ("reasoning.intents" →
// "intents").
type outputStage struct {
	c      Contract
	props  map[string]string // property -> key
	schema *schema.Schema
	raw    json.RawMessage
}

// AgentID implements ReasoningAgent.
func (s *outputStage) AgentID() string { return s.c.ID }

// Preconditions implements ReasoningAgent.
func (s *outputStage) Preconditions() []string { return s.c.Pre }

// Postconditions implements ReasoningAgent.
func (s *outputStage) Postconditions() []string { return s.c.Post }

// OptionalReads implements OptionalReader.
func (s *outputStage) OptionalReads() []string { return s.c.Optional }

// Keys implements KeyDeclarer.
func (s *outputStage) Keys() []KeySpec { return s.c.Keys }

// OutputSchema returns the JSON Schema the stage's output must match.
func (s *outputStage) OutputSchema() json.RawMessage { return append(json.RawMessage(nil), s.raw...) }

func newOutputStage(c Contract, schema json.RawMessage) (*outputStage, error) {
	if err := CheckID(c.ID); err != nil {
		return nil, err
	}
	if len(c.Post) == 0 {
		return nil, fmt.Errorf("stage %s has no postconditions to fill", c.ID)
	}
	s := &outputStage{c: c, props: map[string]string{}}
	types := map[string]KeySpec{}
	for _, k := range c.Keys {
		types[k.Name] = k
	}
	props := map[string]any{}
	var required []string
	for _, k := range c.Post {
		if err := CheckKey(k); err != nil {
			return nil, fmt.Errorf("stage %s: %w", c.ID, err)
		}
		p := localName(k)
		if other, dup := s.props[p]; dup {
			return nil, fmt.Errorf("stage %s: postconditions %s and %s both map to output field %q; rename one", c.ID, other, k, p)
		}
		s.props[p] = k
		required = append(required, p)
		ks := types[k]
		switch {
		case len(ks.Schema) > 0:
			props[p] = json.RawMessage(ks.Schema)
		case ks.Type != TypeAny:
			props[p] = map[string]any{"type": string(ks.Type)}
		default:
			props[p] = map[string]any{}
		}
	}
	if len(schema) == 0 {
		b, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false})
		if err != nil {
			return nil, err
		}
		schema = b
	}
	compiled, err := compileSchema("stage-"+c.ID, schema)
	if err != nil {
		return nil, fmt.Errorf("stage %s: output %w", c.ID, err)
	}
	s.schema, s.raw = compiled, schema
	return s, nil
}

// fill checks out against the output schema and writes each postcondition
// from its property.
func (s *outputStage) fill(ac *AgentContext, out json.RawMessage) error {
	if len(bytes.TrimSpace(out)) == 0 {
		return fmt.Errorf("no JSON object in the output")
	}
	if err := s.schema.Check(out); err != nil {
		return fmt.Errorf("output does not match the schema: %v", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(out, &obj); err != nil || obj == nil {
		return fmt.Errorf("output is not a JSON object")
	}
	props := make([]string, 0, len(s.props))
	for p := range s.props {
		props = append(props, p)
	}
	sort.Strings(props)
	for _, p := range props {
		if v, ok := obj[p]; ok {
			if err := ac.Set(s.props[p], v); err != nil {
				return err
			}
		}
	}
	return nil
}

// templateData exposes the stage's readable keys as nested maps
// ({{input.request}}, {{reasoning.intents}}) as JSON-shaped values.
func templateData(ac *AgentContext, c Contract) map[string]any {
	data := map[string]any{}
	keys := ac.Keys()
	allowed := map[string]bool{}
	for _, k := range append(append([]string{}, c.Pre...), c.Optional...) {
		allowed[k] = true
	}
	for _, k := range keys {
		ns := Namespace(k)
		if ns != NamespaceInput && ns != NamespaceMetadata && !allowed[k] {
			continue
		}
		v, ok := ac.Get(k)
		if !ok {
			continue
		}
		m, _ := data[ns].(map[string]any)
		if m == nil {
			m = map[string]any{}
			data[ns] = m
		}
		m[localName(k)] = v
	}
	out, _ := jsonvalue.Normalize(data).(map[string]any)
	return out
}

// jsonHelper renders a value as indented JSON, without HTML escaping.
func jsonHelper(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(b.String(), "\n")
}

// templateHelpers are the value helpers pipeline templates may call.
var templateHelpers = map[string]handlebars.Helper{"json": jsonHelper}

// Bounds of one pipeline template's rendering.
const (
	templateMaxOutput = 1 << 20
	templateMaxSteps  = 200_000
)

func parseTemplate(id, what, src string) (*handlebars.Template, error) {
	tpl, err := handlebars.Parse(src, templateHelpers)
	if err != nil {
		return nil, fmt.Errorf("stage %s: %s template: %w", id, what, err)
	}
	return tpl, nil
}

func renderTemplate(ctx context.Context, tpl *handlebars.Template, data map[string]any) (string, error) {
	return tpl.Render(ctx, data, handlebars.Limits{MaxOutput: templateMaxOutput, MaxSteps: templateMaxSteps})
}

// render executes tpl, or builds the default prompt when tpl is nil.
func (s *outputStage) render(ctx context.Context, ac *AgentContext, tpl *handlebars.Template) (string, error) {
	data := templateData(ac, s.c)
	if tpl != nil {
		out, err := renderTemplate(ctx, tpl, data)
		if err != nil {
			return "", fmt.Errorf("stage %s: render prompt: %w", s.c.ID, err)
		}
		return out, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You are stage %q of a reasoning pipeline.\n", s.c.ID)
	if req := ac.String(NamespaceInput + ".request"); req != "" {
		fmt.Fprintf(&b, "User request: %s\n", req)
	}
	b.WriteString("\nInputs (JSON):\n")
	for _, k := range append(append([]string{}, s.c.Pre...), s.c.Optional...) {
		if raw, ok := ac.Raw(k); ok {
			fmt.Fprintf(&b, "%s = %s\n", k, raw)
		}
	}
	b.WriteString("\nAnswer with one JSON object and nothing else, matching this JSON Schema:\n")
	b.Write(s.raw)
	b.WriteString("\n")
	return b.String(), nil
}

// firstObject returns the first JSON object schema.JSONCandidates finds
// in a model's answer, or nil.
func firstObject(text string) json.RawMessage {
	for _, c := range schema.JSONCandidates(text) {
		if c[0] == '{' {
			return c
		}
	}
	return nil
}

// ModelStageConfig configures a stage that is one model call with a
// JSON-schema checked answer.
type ModelStageConfig struct {
	Contract
	Model llm.Model
	// ModelName is passed in llm.Request.Model ("" = the provider's).
	ModelName string
	System    string
	// Prompt is a Handlebars template over the stage's readable keys
	// ({{input.request}}, {{json reasoning.intents}}); "" = a default
	// prompt listing the inputs and the output schema.
	Prompt string
	// Schema is the schema of the output object; nil = built from the
	// postconditions and their declared types.
	Schema    json.RawMessage
	MaxTokens int
	// SchemaRetries is how many more turns the model gets, told what was
	// wrong, when its answer does not match the schema (0 = 1; -1 = none).
	SchemaRetries int
}

// ModelStage is a ReasoningAgent that asks a model for its postconditions.
type ModelStage struct {
	*outputStage
	cfg ModelStageConfig
	tpl *handlebars.Template
	// redact replaces the values of capstan's secret variables in the
	// model's answers (proc.SecretRedactor).
	redact llm.Redactor
}

// NewModelStage checks cfg (id, keys, template, schema) and returns the
// stage.
func NewModelStage(cfg ModelStageConfig) (*ModelStage, error) {
	if cfg.Model == nil {
		return nil, fmt.Errorf("stage %s: no model", cfg.ID)
	}
	base, err := newOutputStage(cfg.Contract, cfg.Schema)
	if err != nil {
		return nil, err
	}
	s := &ModelStage{outputStage: base, cfg: cfg, redact: proc.SecretRedactor(os.Environ())}
	if cfg.Prompt != "" {
		if s.tpl, err = parseTemplate(cfg.ID, "prompt", cfg.Prompt); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Execute implements ReasoningAgent: render the prompt, call the model,
// check its JSON against the schema (telling it what was wrong, up to
// SchemaRetries more turns), and write the postconditions.
func (s *ModelStage) Execute(ctx context.Context, ac *AgentContext) (*AgentContext, error) {
	prompt, err := s.render(ctx, ac, s.tpl)
	if err != nil {
		return nil, err
	}
	retries := s.cfg.SchemaRetries
	switch {
	case retries == 0:
		retries = 1
	case retries < 0:
		retries = 0
	}
	// The stage offers no tools; a model that calls one anyway is told so
	// by the tool loop and gets one more turn to answer.
	lp := llm.Loop{Model: s.cfg.Model, MaxTurns: 2, Redact: s.redact, Request: llm.Request{Model: s.cfg.ModelName, System: s.cfg.System,
		OutputSchema: s.raw, OutputSchemaName: s.c.ID, MaxTokens: s.cfg.MaxTokens}}
	msgs := []event.Message{{Role: event.RoleUser, Text: prompt}}
	var last error
	for attempt := 0; attempt <= retries; attempt++ {
		var res *event.QueryResult
		msgs, res, err = lp.Run(ctx, msgs)
		if res != nil {
			ac.AddUsage(res.Usage)
		}
		if err != nil {
			return nil, err
		}
		answer := &msgs[len(msgs)-1] // the final assistant message
		out := res.StructuredOutput
		if len(bytes.TrimSpace(out)) == 0 {
			out = firstObject(answer.Text)
		}
		if last = s.fill(ac, out); last == nil {
			return ac, nil
		}
		if agenterr.CodeOf(last) == agenterr.CodeNamespaceViolation {
			return nil, last
		}
		if answer.Text == "" {
			// A structured answer without text: the transcript must
			// still say what was answered.
			answer.Text = string(out)
		}
		msgs = append(msgs, event.Message{Role: event.RoleUser, Text: "Your answer was rejected: " + last.Error() +
			"\nReply again with one JSON object matching the schema, and nothing else."})
	}
	e := agenterr.Wrap(last, agenterr.CodeStageOutput, agenterr.LayerPipeline, true, "stage %s: model output rejected", s.c.ID)
	e.Hint = "the model's answer must be one JSON object matching the stage's output schema"
	return nil, e
}

// AgentRunner runs a whole capstan agent (a folder with agent.json) with
// parameters and returns its structured result. The pipeline defines it;
// the agent runtime implements it.
type AgentRunner interface {
	RunAgent(ctx context.Context, dir string, params map[string]string) (structured json.RawMessage, err error)
}

// AgentStageConfig configures a stage that runs a capstan agent whose
// structured result fills the stage's postconditions.
type AgentStageConfig struct {
	Contract
	Runner AgentRunner
	// Dir is the agent's folder.
	Dir string
	// Params are Handlebars templates over the stage's readable keys,
	// rendered into the agent's parameters.
	Params map[string]string
	// Schema is the schema of the structured result; nil = built from the
	// postconditions.
	Schema json.RawMessage
}

// AgentStage is a ReasoningAgent backed by a capstan agent.
type AgentStage struct {
	*outputStage
	cfg    AgentStageConfig
	params map[string]*handlebars.Template
}

// NewAgentStage checks cfg and returns the stage.
func NewAgentStage(cfg AgentStageConfig) (*AgentStage, error) {
	if cfg.Runner == nil {
		return nil, fmt.Errorf("stage %s: no agent runner", cfg.ID)
	}
	if cfg.Dir == "" {
		return nil, fmt.Errorf("stage %s: no agent dir", cfg.ID)
	}
	base, err := newOutputStage(cfg.Contract, cfg.Schema)
	if err != nil {
		return nil, err
	}
	s := &AgentStage{outputStage: base, cfg: cfg, params: map[string]*handlebars.Template{}}
	for name, src := range cfg.Params {
		if s.params[name], err = parseTemplate(cfg.ID, "param "+name, src); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Execute implements ReasoningAgent: render the parameters, run the agent,
// check its structured result and write the postconditions.
func (s *AgentStage) Execute(ctx context.Context, ac *AgentContext) (*AgentContext, error) {
	data := templateData(ac, s.c)
	params := make(map[string]string, len(s.params))
	for name, tpl := range s.params {
		v, err := renderTemplate(ctx, tpl, data)
		if err != nil {
			return nil, fmt.Errorf("stage %s: param %s: %w", s.c.ID, name, err)
		}
		params[name] = v
	}
	out, err := s.cfg.Runner.RunAgent(ctx, s.cfg.Dir, params)
	if err != nil {
		return nil, err
	}
	if err := s.fill(ac, out); err != nil {
		if agenterr.CodeOf(err) == agenterr.CodeNamespaceViolation {
			return nil, err
		}
		e := agenterr.Wrap(err, agenterr.CodeStageOutput, agenterr.LayerPipeline, true, "stage %s: agent result rejected", s.c.ID)
		e.Hint = "the agent's structured output must be one JSON object with the stage's postconditions as fields"
		return nil, e
	}
	return ac, nil
}
