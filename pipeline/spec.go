package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
	"github.com/capstan-dev/capstan/llm"
)

// Stage kinds of a pipeline YAML file.
const (
	KindStandard = "standard" // a prebuilt agent, by id (BuildOptions.Standard)
	KindFunc     = "func"     // a Go function registered by name (BuildOptions.Funcs)
	KindModel    = "model"    // one model call with a JSON-schema checked answer
	KindAgent    = "agent"    // a whole capstan agent run through BuildOptions.Runner
)

// SpecVersion is the pipeline file format version.
const SpecVersion = 1

// MaxSpecSize bounds a pipeline file.
const MaxSpecSize = 1 << 20

// Spec is a parsed pipeline file.
type Spec struct {
	File        string
	Version     int
	Options     AgentExecutionOptions
	MaxParallel int
	// Inputs are the input.* keys the caller provides (without the
	// "input." prefix).
	Inputs []string
	Keys   []KeySpec
	Stages []StageSpec
}

// StageSpec is one stage of a pipeline file.
type StageSpec struct {
	ID        string
	Kind      string
	Use       string // func kind: the function's name
	Pre       []string
	Post      []string
	Optional  []string
	DependsOn []string
	Timeout   time.Duration
	Retry     RetryPolicy
	// Model stages.
	Model     string // "provider:model"; "" = BuildOptions.DefaultModel
	System    string
	Prompt    string
	Schema    json.RawMessage
	MaxTokens int
	// Agent stages.
	Dir    string
	Params map[string]string
	// Line and Column locate the stage in the file.
	Line, Column int
}

// Raw YAML shapes (pointers tell "absent" from "false"/"0").
type rawSpec struct {
	Version     int        `yaml:"version"`
	Options     rawOptions `yaml:"options"`
	MaxParallel int        `yaml:"max_parallel"`
	Inputs      []string   `yaml:"inputs"`
	Keys        []rawKey   `yaml:"keys"`
	Stages      []rawStage `yaml:"stages"`
}

type rawOptions struct {
	ValidateContract *bool `yaml:"validate_contract"`
	FailOnViolation  *bool `yaml:"fail_on_violation"`
	TrackPerformance *bool `yaml:"track_performance"`
}

type rawKey struct {
	Name        string `yaml:"name"`
	Type        string `yaml:"type"`
	AllowEmpty  bool   `yaml:"allow_empty"`
	Reducer     string `yaml:"reducer"`
	Schema      any    `yaml:"schema"`
	Description string `yaml:"description"`
}

type rawRetry struct {
	MaxRetries int    `yaml:"max_retries"`
	Backoff    string `yaml:"backoff"`
	MaxBackoff string `yaml:"max_backoff"`
}

type rawStage struct {
	ID        string            `yaml:"id"`
	Kind      string            `yaml:"kind"`
	Use       string            `yaml:"use"`
	Pre       []string          `yaml:"preconditions"`
	Post      []string          `yaml:"postconditions"`
	Optional  []string          `yaml:"optional_reads"`
	DependsOn []string          `yaml:"depends_on"`
	Timeout   any               `yaml:"timeout"`
	Retry     *rawRetry         `yaml:"retry"`
	Model     string            `yaml:"model"`
	System    string            `yaml:"system"`
	Prompt    string            `yaml:"prompt"`
	Schema    any               `yaml:"schema"`
	MaxTokens int               `yaml:"max_tokens"`
	Dir       string            `yaml:"dir"`
	Params    map[string]string `yaml:"params"`
}

// LoadSpec reads and parses a pipeline file.
func LoadSpec(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false, "cannot read pipeline file")
		e.File = path
		return nil, e
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecSize+1))
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false, "cannot read pipeline file")
		e.File = path
		return nil, e
	}
	return ParseSpec(path, data)
}

func specErr(file string, line, col int, hint, format string, args ...any) *agenterr.Error {
	e := agenterr.New(agenterr.CodePipelineSpec, agenterr.LayerPipeline, false, format, args...)
	e.File, e.Line, e.Column, e.Hint = file, line, col, hint
	return e
}

// ParseSpec parses a pipeline file's content. Errors carry the file, line
// and column and a hint; unknown fields are errors.
func ParseSpec(file string, data []byte) (*Spec, error) {
	if len(data) > MaxSpecSize {
		return nil, specErr(file, 0, 0, "", "pipeline file is larger than %d bytes", MaxSpecSize)
	}
	astFile := parseAST(data)
	if n := expandedSize(astFile); n > MaxSpecNodes {
		return nil, specErr(file, 0, 0, "remove deep alias nesting", "pipeline file expands to more than %d YAML nodes (aliases included)", MaxSpecNodes)
	}
	var raw rawSpec
	if err := decodeYAML(data, &raw); err != nil {
		line, col := 0, 0
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			line, col = ye.GetToken().Position.Line, ye.GetToken().Position.Column
		}
		return nil, specErr(file, line, col, "see docs/pipeline.md for the pipeline file format", "%s", firstLine(ye, err))
	}
	p := &specParser{file: file, ast: astFile}
	s := &Spec{File: file, Version: raw.Version, MaxParallel: raw.MaxParallel, Inputs: raw.Inputs}
	if raw.Version != SpecVersion {
		return nil, p.fail("$.version", "start the file with \"version: 1\"", "unsupported pipeline version %d", raw.Version)
	}
	if raw.MaxParallel < 0 || raw.MaxParallel > 64 {
		return nil, p.fail("$.max_parallel", "", "max_parallel %d is outside 0..64", raw.MaxParallel)
	}
	s.Options = DefaultExecutionOptions()
	if o := raw.Options.ValidateContract; o != nil {
		s.Options.ValidateContract = *o
	}
	if o := raw.Options.FailOnViolation; o != nil {
		s.Options.FailOnViolation = *o
	}
	if o := raw.Options.TrackPerformance; o != nil {
		s.Options.TrackPerformance = *o
	}
	if s.Inputs == nil {
		s.Inputs = []string{"request", "repo", "since", "now"}
	}
	for i, in := range s.Inputs {
		if err := CheckKey(NamespaceInput + "." + in); err != nil {
			return nil, p.fail(fmt.Sprintf("$.inputs[%d]", i), "", "input %q: %v", in, err)
		}
	}
	keys, err := p.keys(raw.Keys)
	if err != nil {
		return nil, err
	}
	s.Keys = keys
	if len(raw.Stages) == 0 {
		return nil, p.fail("$", "add a stages: list", "pipeline has no stages")
	}
	seen := map[string]bool{}
	for i, r := range raw.Stages {
		at := fmt.Sprintf("$.stages[%d]", i)
		if err := CheckID(r.ID); err != nil {
			return nil, p.fail(at+".id", "", "stage %d: %v", i+1, err)
		}
		if seen[r.ID] {
			return nil, p.fail(at+".id", "stage ids must be unique", "stage %s is declared twice", r.ID)
		}
		seen[r.ID] = true
		st, err := p.stage(at, r)
		if err != nil {
			return nil, err
		}
		s.Stages = append(s.Stages, st)
	}
	return s, nil
}

// specParser places the problems of one pipeline file.
type specParser struct {
	file string
	ast  *ast.File
}

// pos is the line and column of the YAML path in the file, 0, 0 when unknown.
func (p *specParser) pos(path string) (l, c int) {
	if p.ast == nil {
		return 0, 0
	}
	defer func() {
		if recover() != nil {
			l, c = 0, 0
		}
	}()
	yp, err := yaml.PathString(path)
	if err != nil {
		return 0, 0
	}
	n, err := yp.FilterFile(p.ast)
	if err != nil || n == nil || n.GetToken() == nil {
		return 0, 0
	}
	return n.GetToken().Position.Line, n.GetToken().Position.Column
}

// fail is a coded problem of the file at the YAML path.
func (p *specParser) fail(path, hint, format string, args ...any) error {
	l, c := p.pos(path)
	return specErr(p.file, l, c, hint, format, args...)
}

// keys reads the key declarations of the file.
func (p *specParser) keys(raw []rawKey) ([]KeySpec, error) {
	var out []KeySpec
	for i, k := range raw {
		at := fmt.Sprintf("$.keys[%d]", i)
		if err := CheckKey(k.Name); err != nil {
			return nil, p.fail(at, "", "%v", err)
		}
		ks := KeySpec{Name: k.Name, Type: ValueType(k.Type), AllowEmpty: k.AllowEmpty, Reducer: Reducer(k.Reducer), Description: k.Description}
		if !ks.Type.valid() {
			return nil, p.fail(at+".type", "use array, object, string, number or boolean", "key %s: unknown type %q", k.Name, k.Type)
		}
		if !ks.Reducer.valid() {
			return nil, p.fail(at+".reducer", "use append or merge", "key %s: unknown reducer %q", k.Name, k.Reducer)
		}
		if k.Schema != nil {
			b, err := json.Marshal(k.Schema)
			if err != nil {
				return nil, p.fail(at+".schema", "", "key %s: schema is not JSON-compatible: %v", k.Name, err)
			}
			if _, err := compileSchema("key", b); err != nil {
				return nil, p.fail(at+".schema", "", "key %s: %v", k.Name, err)
			}
			ks.Schema = b
		}
		out = append(out, ks)
	}
	return out, nil
}

// stage reads one stage of the file at the YAML path at.
func (p *specParser) stage(at string, r rawStage) (StageSpec, error) {
	st := StageSpec{ID: r.ID, Kind: r.Kind, Use: r.Use, Pre: r.Pre, Post: r.Post, Optional: r.Optional,
		DependsOn: r.DependsOn, Model: r.Model, System: r.System, Prompt: r.Prompt, MaxTokens: r.MaxTokens,
		Dir: r.Dir, Params: r.Params}
	st.Line, st.Column = p.pos(at + ".id")
	if st.Kind == "" {
		st.Kind = KindStandard
	}
	switch st.Kind {
	case KindStandard:
		if len(r.Pre)+len(r.Post)+len(r.Optional) > 0 || r.Use != "" {
			return StageSpec{}, p.fail(at, "standard agents have fixed contracts; use kind: func or model for your own", "stage %s: a standard stage takes no preconditions, postconditions, optional_reads or use", r.ID)
		}
	case KindFunc:
		if r.Use == "" {
			st.Use = r.ID
		}
	case KindModel, KindAgent:
	default:
		return StageSpec{}, p.fail(at+".kind", "use standard, func, model or agent", "stage %s: unknown kind %q", r.ID, r.Kind)
	}
	if st.Kind != KindModel && (r.Model != "" || r.System != "" || r.Prompt != "" || r.MaxTokens != 0) {
		return StageSpec{}, p.fail(at, "model, system, prompt and max_tokens belong to kind: model", "stage %s: model settings on a %s stage", r.ID, st.Kind)
	}
	if st.Kind != KindAgent && (r.Dir != "" || r.Params != nil) {
		return StageSpec{}, p.fail(at, "dir and params belong to kind: agent", "stage %s: agent settings on a %s stage", r.ID, st.Kind)
	}
	if st.Kind == KindAgent && r.Dir == "" {
		return StageSpec{}, p.fail(at, "give the agent's folder as dir:", "stage %s: agent stage without dir", r.ID)
	}
	if (st.Kind == KindModel || st.Kind == KindAgent || st.Kind == KindFunc) && len(r.Post) == 0 {
		return StageSpec{}, p.fail(at, "list the keys the stage fills under postconditions:", "stage %s has no postconditions", r.ID)
	}
	if r.Schema != nil {
		if st.Kind != KindModel && st.Kind != KindAgent {
			return StageSpec{}, p.fail(at+".schema", "", "stage %s: schema belongs to model and agent stages", r.ID)
		}
		b, err := json.Marshal(r.Schema)
		if err != nil {
			return StageSpec{}, p.fail(at+".schema", "", "stage %s: schema is not JSON-compatible: %v", r.ID, err)
		}
		st.Schema = b
	}
	if r.MaxTokens < 0 {
		return StageSpec{}, p.fail(at+".max_tokens", "", "stage %s: max_tokens is negative", r.ID)
	}
	if r.Timeout != nil {
		d, err := duration(r.Timeout)
		if err != nil || d <= 0 {
			return StageSpec{}, p.fail(at+".timeout", `write a Go duration with a unit, e.g. "30s" or "2m"`, "stage %s: timeout %v is not a positive duration", r.ID, r.Timeout)
		}
		st.Timeout = d
	}
	if err := p.stageRetry(at, r, &st); err != nil {
		return StageSpec{}, err
	}
	for li, l := range [][]string{r.Pre, r.Post, r.Optional} {
		field := []string{"preconditions", "postconditions", "optional_reads"}[li]
		for j, k := range l {
			if err := CheckKey(k); err != nil {
				return StageSpec{}, p.fail(fmt.Sprintf("%s.%s[%d]", at, field, j), "", "stage %s: %v", r.ID, err)
			}
		}
	}
	return st, nil
}

// stageRetry reads a stage's retry settings into st.
func (p *specParser) stageRetry(at string, r rawStage, st *StageSpec) error {
	if r.Retry == nil {
		return nil
	}
	st.Retry.MaxRetries = r.Retry.MaxRetries
	if r.Retry.MaxRetries < 0 || r.Retry.MaxRetries > MaxRetriesLimit {
		return p.fail(at+".retry.max_retries", "", "stage %s: max_retries %d is outside 0..%d", r.ID, r.Retry.MaxRetries, MaxRetriesLimit)
	}
	for name, v := range map[string]string{"backoff": r.Retry.Backoff, "max_backoff": r.Retry.MaxBackoff} {
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return p.fail(at+".retry."+name, `write a Go duration, e.g. "200ms"`, "stage %s: retry %s %q is not a positive duration", r.ID, name, v)
		}
		if name == "backoff" {
			st.Retry.Backoff = d
		} else {
			st.Retry.MaxBackoff = d
		}
	}
	return nil
}

// MaxSpecNodes bounds the YAML nodes of a pipeline file once its aliases
// are expanded, so that an alias bomb ("billion laughs") is refused before
// decoding.
const MaxSpecNodes = 100_000

// expandedSize counts the nodes of f with aliases expanded, without
// expanding them: each anchor's size is computed once.
func expandedSize(f *ast.File) int {
	if f == nil {
		return 0
	}
	anchors := map[string]int{}
	var size func(n ast.Node) int
	size = func(n ast.Node) int {
		total := 1
		switch x := n.(type) {
		case nil:
			return 0
		case *ast.DocumentNode:
			total += size(x.Body)
		case *ast.MappingNode:
			for _, v := range x.Values {
				total += size(v)
			}
		case *ast.MappingValueNode:
			total += size(x.Key) + size(x.Value)
		case *ast.MappingKeyNode:
			total += size(x.Value)
		case *ast.SequenceNode:
			for _, v := range x.Values {
				total += size(v)
			}
		case *ast.TagNode:
			total += size(x.Value)
		case *ast.AnchorNode:
			v := size(x.Value)
			if x.Name != nil {
				anchors[x.Name.String()] = v
			}
			total += v
		case *ast.AliasNode:
			if x.Value != nil {
				total += anchors[x.Value.String()]
			}
		}
		if total > MaxSpecNodes { // saturate: the answer is already "too big"
			return MaxSpecNodes + 1
		}
		return total
	}
	n := 0
	for _, d := range f.Docs {
		n += size(d)
		if n > MaxSpecNodes {
			return n
		}
	}
	return n
}

// parseAST parses data for error positions; nil when the parser fails.
func parseAST(data []byte) (f *ast.File) {
	defer func() {
		if recover() != nil {
			f = nil
		}
	}()
	f, _ = parser.ParseBytes(data, 0)
	return f
}

// decodeYAML decodes strictly. goccy/go-yaml v1.19.2 can panic on some
// malformed input (found by FuzzPipelineYAML: a tagged scalar where a list
// is expected); such a panic becomes an ordinary parse error.
func decodeYAML(data []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML parser failed on this input (%v)", p)
		}
	}()
	return yamlsafe.Unmarshal(data, v, yaml.Strict())
}

func firstLine(ye yaml.Error, err error) string {
	msg := err.Error()
	if ye != nil {
		msg = ye.GetMessage()
	}
	msg, _, _ = strings.Cut(strings.TrimSpace(msg), "\n")
	return msg
}

func duration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("not a string")
	}
	return time.ParseDuration(s)
}

// BuildOptions resolves what a pipeline file names.
type BuildOptions struct {
	// Config is the manager configuration; Options and MaxParallel from
	// the file override it.
	Config Config
	// Standard returns the prebuilt agent with an id (kind: standard).
	Standard func(id string) (ReasoningAgent, error)
	// Funcs are the Go functions stages of kind func may use.
	Funcs map[string]func(ctx context.Context, ac *AgentContext) error
	// DefaultModel serves model stages without their own model:.
	DefaultModel llm.Model
	// OpenModel opens a stage's own model: spec (nil = llm.OpenModel).
	OpenModel func(ctx context.Context, spec string) (llm.Model, error)
	// Runner runs agent stages.
	Runner AgentRunner
	// BaseDir resolves relative agent dirs ("" = the spec file's folder).
	BaseDir string
}

// Build turns the spec into a Manager and checks it (as Compile does,
// with the spec's inputs); every error names the file and the line of the
// stage concerned.
func (s *Spec) Build(ctx context.Context, opts BuildOptions) (*Manager, error) {
	cfg := opts.Config
	cfg.Options = s.Options
	if s.MaxParallel > 0 {
		cfg.MaxParallel = s.MaxParallel
	}
	cfg.Keys = append(append([]KeySpec(nil), cfg.Keys...), s.Keys...)
	m := New(cfg)
	base := opts.BaseDir
	if base == "" {
		base = filepath.Dir(s.File)
	}
	models := map[string]llm.Model{}
	for _, st := range s.Stages {
		var a ReasoningAgent
		c := Contract{ID: st.ID, Pre: st.Pre, Post: st.Post, Optional: st.Optional}
		switch st.Kind {
		case KindStandard:
			if opts.Standard == nil {
				return nil, s.at(st, "", "stage %s: no standard agents are available here", st.ID)
			}
			std, err := opts.Standard(st.ID)
			if err != nil {
				return nil, s.at(st, "use one of the standard agent ids, or kind: func/model/agent", "stage %s: %v", st.ID, err)
			}
			a = std
		case KindFunc:
			f, ok := opts.Funcs[st.Use]
			if !ok {
				return nil, s.at(st, "register the function in BuildOptions.Funcs", "stage %s: unknown function %q", st.ID, st.Use)
			}
			a = &FuncAgent{ID: st.ID, Pre: st.Pre, Post: st.Post, Optional: st.Optional, Fn: f}
		case KindModel:
			ms, err := s.modelStage(ctx, st, c, opts, base, models)
			if err != nil {
				return nil, err
			}
			a = ms
		case KindAgent:
			as, err := s.agentStage(st, c, opts, base)
			if err != nil {
				return nil, err
			}
			a = as
		}
		if err := m.RegisterStage(a, StageConfig{DependsOn: st.DependsOn, Timeout: st.Timeout, Retry: st.Retry}); err != nil {
			return nil, s.locate(err)
		}
	}
	inputs := []string{KeySessionID, KeyTraceID}
	for _, in := range s.Inputs {
		inputs = append(inputs, NamespaceInput+"."+in)
	}
	if _, err := m.Compile(inputs...); err != nil {
		return nil, s.locate(err)
	}
	return m, nil
}

// at is an error of the pipeline file at stage st.
func (s *Spec) at(st StageSpec, hint, format string, args ...any) error {
	return specErr(s.File, st.Line, st.Column, hint, format, args...)
}

// modelStage builds model stage st: its own model (opened once per spec
// for all the stages that name it, in models) or the default one.
func (s *Spec) modelStage(ctx context.Context, st StageSpec, c Contract, opts BuildOptions, base string, models map[string]llm.Model) (ReasoningAgent, error) {
	model := opts.DefaultModel
	if st.Model != "" {
		if models[st.Model] == nil {
			open := opts.OpenModel
			if open == nil {
				open = func(ctx context.Context, spec string) (llm.Model, error) {
					return llm.OpenModel(ctx, spec, llm.Config{AgentDir: base})
				}
			}
			mm, err := open(ctx, st.Model)
			if err != nil {
				return nil, s.at(st, "", "stage %s: model %s: %v", st.ID, st.Model, err)
			}
			models[st.Model] = mm
		}
		model = models[st.Model]
	}
	if model == nil {
		return nil, s.at(st, "pass --model provider:model, or set model: on the stage", "stage %s is a model stage but no model is configured", st.ID)
	}
	ms, err := NewModelStage(ModelStageConfig{Contract: c, Model: model, System: st.System, Prompt: st.Prompt, Schema: st.Schema, MaxTokens: st.MaxTokens})
	if err != nil {
		return nil, s.at(st, "", "%v", err)
	}
	return ms, nil
}

// agentStage builds agent stage st, whose agent folder is relative to
// the pipeline file (base).
func (s *Spec) agentStage(st StageSpec, c Contract, opts BuildOptions, base string) (ReasoningAgent, error) {
	if opts.Runner == nil {
		return nil, s.at(st, "this build of capstan cannot run agents inside a pipeline; use a model or func stage", "stage %s: no agent runner", st.ID)
	}
	dir := st.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, s.at(st, "dir is relative to the pipeline file", "stage %s: agent dir %s is not a folder", st.ID, dir)
	}
	as, err := NewAgentStage(AgentStageConfig{Contract: c, Runner: opts.Runner, Dir: dir, Params: st.Params, Schema: st.Schema})
	if err != nil {
		return nil, s.at(st, "", "%v", err)
	}
	return as, nil
}

// locate adds the file and the line of the first stage each problem names.
func (s *Spec) locate(err error) error {
	var ce *CompileError
	e := agenterr.From(err)
	if e == nil || !errors.As(err, &ce) {
		return err
	}
	line := map[string][2]int{}
	for _, st := range s.Stages {
		line[st.ID] = [2]int{st.Line, st.Column}
	}
	out := &CompileError{}
	for i, p := range ce.Problems {
		if len(p.Stages) > 0 {
			if l, ok := line[p.Stages[0]]; ok && l[0] > 0 {
				p.Message = fmt.Sprintf("%s:%d:%d: %s", s.File, l[0], l[1], p.Message)
				if i == 0 {
					e.Line, e.Column = l[0], l[1]
				}
			}
		}
		out.Problems = append(out.Problems, p)
	}
	c := *e
	c.File = s.File
	c.Err = out
	return &c
}
