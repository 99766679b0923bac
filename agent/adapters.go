package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"sync"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/verify"
)

// retryTemplates adapts the prompt resolver to completion's
// RetryTemplateSource.
type retryTemplates struct{ r *agentdir.PromptResolver }

// The completion layer asks for f_{edition}_{adaptation}.md and then for
// f_{edition}.md itself, so a prompt-layer fallback from the first to the
// second (reported as a warning) counts as "not found" here.
func (t retryTemplates) ResolveRetry(ctx context.Context, c1, c2, c3, edition, adaptation string) (string, bool, error) {
	rt, err := t.r.ResolveRetry(ctx, c1, c2, c3, edition, adaptation)
	if err != nil || !rt.Found || (adaptation != "" && len(rt.Warnings) > 0) {
		return "", false, err
	}
	return rt.Text, true, nil
}

// schemas resolves outputSchemaRef and file-validator schema references
// under the agent's schemas/ folder, compiling each once. The resolver and
// the map of compiled schemas are made at the first reference (one pointer
// until then): most agents hold a schemas they never use before their
// first model call, if ever.
type schemas struct {
	dir  string // the schemas folder on disk (or as the pinned files name it)
	rel  string // the schemas folder relative to the agent folder, slash-separated
	fsys fs.FS  // the pinned schemas folder, or nil to read dir
	mu   sync.Mutex
	made *madeSchemas // nil before the first reference
}

// madeSchemas is what a schemas makes at its first reference: the
// resolver and the schemas compiled so far.
type madeSchemas struct {
	resolver *schema.Resolver
	compiled map[agentdir.SchemaRef]*compiledSchema
}

type compiledSchema struct {
	raw       json.RawMessage
	validator *schema.Validator
}

// newSchemas reads the schema files from fsys (a pinned definition, see
// agentdir.Definition.FS) or, when it is nil, from agentDir on disk.
func newSchemas(agentDir, schemasDir string, fsys fs.FS) *schemas {
	if schemasDir == "" {
		schemasDir = agentdir.DefaultSchemasDir
	}
	s := &schemas{dir: filepath.Join(agentDir, filepath.FromSlash(schemasDir)), rel: path.Clean(filepath.ToSlash(schemasDir))}
	if fsys != nil {
		if sub, err := fs.Sub(fsys, path.Clean(filepath.ToSlash(schemasDir))); err == nil {
			s.fsys = sub
		}
	}
	return s
}

// get resolves and compiles ref.
func (s *schemas) get(ref agentdir.SchemaRef) (*compiledSchema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.made
	if m == nil {
		m = &madeSchemas{resolver: schema.NewResolver(s.dir), compiled: map[agentdir.SchemaRef]*compiledSchema{}}
		if s.fsys != nil {
			m.resolver = schema.NewResolverFS(s.fsys, s.dir)
		}
		s.made = m
	}
	if c, ok := m.compiled[ref]; ok {
		return c, nil
	}
	raw, v, err := m.resolver.Compile(ref.File, ref.Schema)
	if err != nil {
		return nil, s.inAgentFolder(err)
	}
	c := &compiledSchema{raw: raw, validator: v}
	m.compiled[ref] = c
	return c, nil
}

// Schema implements verify.SchemaSource.
func (s *schemas) Schema(ref agentdir.SchemaRef) (verify.SchemaValidator, error) {
	c, err := s.get(ref)
	if err != nil {
		return nil, err
	}
	return c.validator, nil
}

// OutputSchema implements verdict.Schemas.
func (s *schemas) OutputSchema(ref agentdir.SchemaRef) (json.RawMessage, verify.SchemaValidator, error) {
	c, err := s.get(ref)
	if err != nil {
		return nil, nil, err
	}
	return c.raw, c.validator, nil
}

// inAgentFolder names the schema files of an invalid schema's problems
// relative to the agent folder (schemas/x.json), as every other problem
// of `capstan validate` names its file; other errors are returned as they
// are.
func (s *schemas) inAgentFolder(err error) error {
	var inv *schema.InvalidSchemaError
	e := agenterr.From(err)
	if e == nil || !errors.As(err, &inv) {
		return err
	}
	moved := *inv
	moved.Problems = slices.Clone(inv.Problems)
	for i := range moved.Problems {
		moved.Problems[i].File = path.Join(s.rel, moved.Problems[i].File)
	}
	out := *e
	out.File, out.Err = moved.Problems[0].File, &moved
	return &out
}
