// Prompt resolution finds prompt files by C3L reference or explicit path,
// follows the fallback chain (the C3L file, the global fallback, the step's
// fallback), strips and parses YAML frontmatter and substitutes {uv-name}
// variables.
//
// A C3L reference names the file
//
//	{base}/{c1}/{c2}/{c3}/f_{edition}[_{adaptation}].md
//
// with edition "default" when unset. Every file the resolver reads must lie
// inside the directory it was resolved against, after symlinks are followed:
// C3L files inside the prompt base, global fallbacks inside the fallback
// directory, everything inside the agent directory. References come from
// configuration and, through step transitions, indirectly from a model, so
// they are never trusted to stay inside by themselves.
//
// A PromptResolver caches parsed files keyed by path and checked against the file's
// identity, size and modification time on every use, so edits take effect on
// the next resolution and an unchanged prompt costs one stat call.

package agentdir

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
)

// Config configures a Resolver. Relative paths are relative to AgentDir.
type PromptConfig struct {
	// AgentDir is the agent's directory; every prompt file must lie inside
	// it. Empty means the current directory.
	AgentDir string
	// Base is the C3L root directory (default "prompts").
	Base string
	// C1 is the C3L category used when a Ref leaves C1 empty (default
	// "steps").
	C1 string
	// FallbackDir is the global fallback directory, the last link of the
	// fallback chain; empty disables that link of the chain.
	FallbackDir string
	// SystemPath is the system prompt file (agent.json systemPromptPath).
	SystemPath string
	// FS, when set, holds the agent's files (paths relative to AgentDir,
	// such as a pinned definition snapshot) and every prompt is read from
	// it instead of the disk. Its content must not change: a file is read
	// and parsed once and served from the cache afterwards.
	FS fs.FS
}

// Ref references a prompt: either a C3L reference (C2 and C3 set, C1,
// Edition and Adaptation optional) or an explicit Path. Path and Fallback
// are relative to the prompt base (absolute paths are allowed) and must stay
// inside the agent directory.
type PromptRef struct {
	C1, C2, C3 string
	// Edition defaults to "default".
	Edition    string
	Adaptation string
	// Fallback is tried when the primary file does not exist.
	Fallback string
	// Path is an explicit prompt file, used instead of the C3L fields.
	Path string
}

// String renders the reference for messages.
func (r PromptRef) String() string {
	if r.Path != "" {
		return "path " + r.Path
	}
	s := fmt.Sprintf("c1=%q c2=%q c3=%q edition=%q", r.C1, r.C2, r.C3, r.Edition)
	if r.Adaptation != "" {
		s += fmt.Sprintf(" adaptation=%q", r.Adaptation)
	}
	return s
}

// Resolved is a resolved prompt.
type ResolvedPrompt struct {
	// Text is the prompt body with frontmatter stripped and variables
	// substituted; never empty.
	Text string
	// Path is the file the text came from (AgentDir joined with its path
	// inside the agent directory).
	Path string
	// Frontmatter is the parsed YAML frontmatter, nil when the file has
	// none. The map is a copy; nested values are shared with the cache and
	// must not be modified.
	Frontmatter map[string]any
	// Variables lists the {uv-name} names the template uses (without the
	// "uv-" prefix), in order of first use. Shared with the cache: do not
	// modify.
	Variables []string
	// Warnings report undefined variables and fallbacks used; a fallback
	// is never used silently.
	Warnings []string
	// UsedFallback is the fallback file used instead of the primary one
	// (relative to the agent directory), or "" when the primary was found.
	UsedFallback string
}

// Resolver resolves prompt references. It is safe for concurrent use.
type PromptResolver struct {
	agentDir    string // absolute, cleaned
	base        string // absolute, cleaned
	fallbackDir string // absolute, cleaned; "" when disabled
	systemPath  string // absolute, cleaned; "" when unset
	c1          string
	cfgErr      error // a configuration problem reported by every call
	cache       fileCache
}

// New returns a Resolver for cfg. Configuration problems (a base or
// fallback directory outside the agent directory) are reported by every
// resolution, so New itself cannot fail.
func NewPromptResolver(cfg PromptConfig) *PromptResolver {
	r := &PromptResolver{c1: cfg.C1, cache: fileCache{fsys: cfg.FS}}
	if r.c1 == "" {
		r.c1 = "steps"
	}
	agentDir := cfg.AgentDir
	if agentDir == "" {
		agentDir = "."
	}
	abs, err := filepath.Abs(agentDir)
	if err != nil {
		r.cfgErr = agenterr.Wrap(err, agenterr.CodePromptNotFound, agenterr.LayerPrompt, false, "cannot locate agent directory %q", agentDir)
		return r
	}
	r.agentDir = abs
	base := cfg.Base
	if base == "" {
		base = "prompts"
	}
	r.base, r.cfgErr = r.configPath(base, "prompt base")
	if cfg.FallbackDir != "" && r.cfgErr == nil {
		r.fallbackDir, r.cfgErr = r.configPath(cfg.FallbackDir, "fallback directory")
	}
	if cfg.SystemPath != "" && r.cfgErr == nil {
		r.systemPath, r.cfgErr = r.configPath(cfg.SystemPath, "system prompt path")
	}
	return r
}

// ConfigErr is the configuration problem every resolution reports (a
// prompt base, fallback directory or system prompt path outside the agent
// directory), or nil.
func (r *PromptResolver) ConfigErr() error { return r.cfgErr }

// configPath makes a configured path absolute and checks that it lies in
// the agent directory.
func (r *PromptResolver) configPath(p, what string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.agentDir, p)
	}
	p = filepath.Clean(p)
	if _, ok := within(r.agentDir, p); !ok {
		return "", &agenterr.Error{
			Code: agenterr.CodePathEscape, Layer: agenterr.LayerPrompt,
			Message: fmt.Sprintf("%s %s is outside the agent directory %s", what, p, r.agentDir),
			Hint:    "keep prompts inside the agent directory",
		}
	}
	return p, nil
}

// Rel renders a path the resolver returned (Resolved.Path) relative to
// the agent directory, with forward slashes; a path outside it is
// returned as it is.
func (r *PromptResolver) Rel(abs string) string { return r.rel(abs) }

// rel renders an absolute path inside the agent directory relative to it,
// with forward slashes, for messages.
func (r *PromptResolver) rel(abs string) string {
	if rel, ok := within(r.agentDir, abs); ok {
		return filepath.ToSlash(rel)
	}
	return abs
}

// candidate is one file of a fallback chain.
type candidate struct {
	root string // directory the file must stay in
	abs  string // absolute path
	why  string // "" for the primary, else the link of the chain
}

// safeSegment reports whether s can be used as one path segment of a C3L
// reference: not empty, no separators, no "..", no control characters.
func safeSegment(s string) bool {
	if s == "" || s == "." || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c == '\\' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

func invalidRef(ref PromptRef, format string, args ...any) error {
	return &agenterr.Error{
		Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
		Message: "invalid prompt reference (" + ref.String() + "): " + fmt.Sprintf(format, args...),
		Hint:    "c1, c2, c3, edition and adaptation must each be a single path segment: no '/', '\\', '..' or control characters",
	}
}

// C3LFile returns the file a C3L reference names, relative to the prompt
// base and "/"-separated: {c1}/{c2}/{c3}/f_{edition}[_{adaptation}].md,
// with c1 when ref.C1 is empty and edition "default" when unset. An unsafe
// segment is PROMPT_PARSE, as in Resolve.
func C3LFile(c1 string, ref PromptRef) (string, error) {
	if ref.C1 != "" {
		c1 = ref.C1
	}
	name, err := c3lName(c1, ref)
	if err != nil {
		return "", err
	}
	return c1 + "/" + ref.C2 + "/" + ref.C3 + "/" + name, nil
}

// c3lName checks the segments of a C3L reference (c1 resolved) and
// returns its file name.
func c3lName(c1 string, ref PromptRef) (string, error) {
	ref.C1 = c1 // errors show the c1 the file is looked up under
	edition := ref.Edition
	if edition == "" {
		edition = "default"
	}
	for _, f := range [...]struct{ name, v string }{{"c1", c1}, {"c2", ref.C2}, {"c3", ref.C3}, {"edition", edition}} {
		if !safeSegment(f.v) {
			return "", invalidRef(ref, "%s %q is not a safe path segment", f.name, f.v)
		}
	}
	if ref.Adaptation != "" && !safeSegment(ref.Adaptation) {
		return "", invalidRef(ref, "adaptation %q is not a safe path segment", ref.Adaptation)
	}
	return fileName(edition, ref.Adaptation), nil
}

// fileName returns the C3L file name f_{edition}[_{adaptation}].md.
func fileName(edition, adaptation string) string {
	if adaptation == "" {
		return "f_" + edition + ".md"
	}
	return "f_" + edition + "_" + adaptation + ".md"
}

// explicitPath resolves a Path or Fallback of a Ref: relative to the prompt
// base, and inside the agent directory.
func (r *PromptResolver) explicitPath(ref PromptRef, p, what string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", invalidRef(ref, "%s contains a NUL byte", what)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.base, p)
	}
	p = filepath.Clean(p)
	if _, ok := within(r.agentDir, p); !ok || p == r.agentDir {
		return "", &agenterr.Error{
			Code: agenterr.CodePathEscape, Layer: agenterr.LayerPrompt,
			Message: fmt.Sprintf("prompt %s %q leads outside the agent directory", what, p),
			Hint:    "prompt paths are relative to the prompt base and must stay inside the agent directory",
		}
	}
	return p, nil
}

// chain returns the fallback chain of ref, the files tried in order: the
// primary file,
// ref.Fallback, then {FallbackDir}/<primary file name>.
func (r *PromptResolver) chain(ref PromptRef) ([]candidate, error) {
	if r.cfgErr != nil {
		return nil, r.cfgErr
	}
	cands := make([]candidate, 0, 3)
	var name string
	if ref.Path != "" {
		if ref.C1 != "" || ref.C2 != "" || ref.C3 != "" || ref.Edition != "" || ref.Adaptation != "" {
			return nil, invalidRef(ref, "set either path or c1/c2/c3/edition/adaptation, not both")
		}
		p, err := r.explicitPath(ref, ref.Path, "path")
		if err != nil {
			return nil, err
		}
		cands = append(cands, candidate{root: r.agentDir, abs: p})
		name = filepath.Base(p)
	} else {
		c1 := ref.C1
		if c1 == "" {
			c1 = r.c1
		}
		var err error
		if name, err = c3lName(c1, ref); err != nil {
			return nil, err
		}
		var b strings.Builder
		b.Grow(len(r.base) + len(c1) + len(ref.C2) + len(ref.C3) + len(name) + 4)
		b.WriteString(r.base)
		for _, s := range [...]string{c1, ref.C2, ref.C3, name} {
			b.WriteByte(filepath.Separator)
			b.WriteString(s)
		}
		cands = append(cands, candidate{root: r.base, abs: b.String()})
	}
	if ref.Fallback != "" {
		p, err := r.explicitPath(ref, ref.Fallback, "fallback")
		if err != nil {
			return nil, err
		}
		cands = append(cands, candidate{root: r.agentDir, abs: p, why: "the reference's fallback"})
	}
	if r.fallbackDir != "" {
		cands = append(cands, candidate{root: r.fallbackDir, abs: filepath.Join(r.fallbackDir, name), why: "the global fallback directory"})
	}
	return cands, nil
}

// Resolve finds the prompt ref names, following the fallback chain of seed
// 002 (primary C3L file or Path → ref.Fallback → {FallbackDir}/<primary file
// name>), strips its frontmatter and substitutes vars in one pass. vars are
// keyed without the "uv-" prefix: vars["origin"] replaces {uv-origin}.
// Undefined variables are left as written and reported in Warnings.
//
// Errors: PROMPT_PARSE for an invalid reference, invalid frontmatter or an
// empty body; PATH_ESCAPE for a path or symlink leading outside the
// directory it must stay in; PROMPT_NOT_FOUND, naming the primary file as
// its File and the fallbacks tried after it, in order, when no file of the
// chain exists.
func (r *PromptResolver) Resolve(ctx context.Context, ref PromptRef, vars map[string]string) (ResolvedPrompt, error) {
	if err := ctx.Err(); err != nil {
		return ResolvedPrompt{}, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerPrompt, false, "prompt resolution canceled")
	}
	cands, err := r.chain(ref)
	if err != nil {
		return ResolvedPrompt{}, err
	}
	for i, c := range cands {
		t, err := r.load(c)
		if err == errNotFound {
			continue
		}
		if err != nil {
			return ResolvedPrompt{}, err
		}
		res := r.render(t, c.abs, vars)
		if i > 0 {
			res.UsedFallback = r.rel(c.abs)
			res.Warnings = append(res.Warnings, fmt.Sprintf("prompt %s not found; using %s from %s", r.rel(cands[0].abs), res.UsedFallback, c.why))
		}
		return res, nil
	}
	return ResolvedPrompt{}, r.notFound(ref, cands)
}

func (r *PromptResolver) load(c candidate) (*promptTemplate, error) {
	rel, ok := within(c.root, c.abs)
	if !ok {
		return nil, promptEscapeError(r.rel(c.abs), c.root)
	}
	return r.cache.load(r.agentDir, c.root, rel, c.abs, r.rel(c.abs))
}

func (r *PromptResolver) render(t *promptTemplate, abs string, vars map[string]string) ResolvedPrompt {
	text, undefined := t.render(vars)
	res := ResolvedPrompt{Text: text, Path: abs, Variables: t.vars}
	if t.frontmatter != nil {
		res.Frontmatter = maps.Clone(t.frontmatter)
	}
	for _, name := range undefined {
		res.Warnings = append(res.Warnings, fmt.Sprintf("undefined variable {uv-%s} in %s left as-is", name, r.rel(abs)))
	}
	return res
}

func (r *PromptResolver) notFound(ref PromptRef, cands []candidate) error {
	if ref.Path == "" {
		if ref.C1 == "" {
			ref.C1 = r.c1
		}
		if ref.Edition == "" {
			ref.Edition = "default"
		}
	}
	tried := make([]string, len(cands))
	for i, c := range cands {
		tried[i] = r.rel(c.abs)
	}
	hint := "create " + tried[0]
	if ref.Fallback == "" && ref.Path == "" {
		hint += ", or give the step a fallback prompt"
	}
	// The primary file is the error's File, shown once as its location;
	// the message names only the fallbacks tried after it.
	msg := fmt.Sprintf("no prompt for %s: the file does not exist", ref)
	if ref.Path != "" {
		msg = "the prompt file does not exist"
	}
	switch len(tried) {
	case 1:
	case 2:
		msg += ", nor does its fallback " + tried[1]
	default:
		msg += ", nor do its fallbacks " + strings.Join(tried[1:], ", ")
	}
	return &agenterr.Error{
		Code: agenterr.CodePromptNotFound, Layer: agenterr.LayerPrompt,
		Message: msg,
		File:    tried[0],
		Hint:    hint,
	}
}

// ResolveSystem resolves the system prompt (Config.SystemPath) with vars
// substituted as in Resolve. The result is never empty.
func (r *PromptResolver) ResolveSystem(ctx context.Context, vars map[string]string) (ResolvedPrompt, error) {
	if err := ctx.Err(); err != nil {
		return ResolvedPrompt{}, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerPrompt, false, "prompt resolution canceled")
	}
	if r.cfgErr != nil {
		return ResolvedPrompt{}, r.cfgErr
	}
	if r.systemPath == "" {
		return ResolvedPrompt{}, &agenterr.Error{
			Code: agenterr.CodePromptNotFound, Layer: agenterr.LayerPrompt,
			Message: "no system prompt configured",
			Hint:    "set runner.systemPromptPath in agent.json",
		}
	}
	c := candidate{root: r.agentDir, abs: r.systemPath}
	t, err := r.load(c)
	if err == errNotFound {
		return ResolvedPrompt{}, &agenterr.Error{
			Code: agenterr.CodePromptNotFound, Layer: agenterr.LayerPrompt,
			Message: "system prompt not found", File: r.rel(r.systemPath),
			Hint: "create the file or fix runner.systemPromptPath",
		}
	}
	if err != nil {
		return ResolvedPrompt{}, err
	}
	return r.render(t, r.systemPath, vars), nil
}

// Exists follows the fallback chain of ref like Resolve, without reading
// any file, and returns the first file that exists inside the directory it
// must stay in. An invalid reference does not exist.
func (r *PromptResolver) Exists(ref PromptRef) (path string, ok bool) {
	cands, err := r.chain(ref)
	if err != nil {
		return "", false
	}
	for _, c := range cands {
		rel, ok := within(c.root, c.abs)
		if ok && r.cache.exists(r.agentDir, c.root, rel, c.abs) {
			return c.abs, true
		}
	}
	return "", false
}

// RetryTemplate is a retry prompt template found by ResolveRetry.
type RetryTemplateRef struct {
	// Found is false when neither candidate file exists; the caller then
	// uses its built-in generic retry prompt.
	Found bool
	// Text is the raw template (frontmatter stripped, nothing substituted:
	// retry prompts are Handlebars templates rendered by the caller).
	Text string
	// Path is the file used.
	Path string
	// Frontmatter is the parsed frontmatter (for example its params list),
	// nil when the file has none. Nested values are shared: do not modify.
	Frontmatter map[string]any
	// Params is the frontmatter's "params" list when it is a list of
	// strings, else nil.
	Params []string
	// Tried lists the files tried, in order (relative to the agent
	// directory).
	Tried []string
	// Warnings reports that the adaptation-specific file was missing and the
	// edition's generic file was used.
	Warnings []string
}

// ResolveRetry finds the retry prompt for a failure pattern:
// {base}/{c1}/{c2}/{c3}/f_{edition}_{adaptation}.md, then
// {base}/{c1}/{c2}/{c3}/f_{edition}.md. When neither exists the result has
// Found false and a nil error. An empty c1 or edition takes the defaults
// ("steps"/Config.C1 and "failed"); adaptation may be empty.
func (r *PromptResolver) ResolveRetry(ctx context.Context, c1, c2, c3, edition, adaptation string) (RetryTemplateRef, error) {
	if err := ctx.Err(); err != nil {
		return RetryTemplateRef{}, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerPrompt, false, "prompt resolution canceled")
	}
	if edition == "" {
		edition = "failed"
	}
	refs := []PromptRef{{C1: c1, C2: c2, C3: c3, Edition: edition, Adaptation: adaptation}}
	if adaptation != "" {
		refs = append(refs, PromptRef{C1: c1, C2: c2, C3: c3, Edition: edition})
	}
	var out RetryTemplateRef
	for i, ref := range refs {
		cands, err := r.chain(PromptRef{C1: ref.C1, C2: ref.C2, C3: ref.C3, Edition: ref.Edition, Adaptation: ref.Adaptation})
		if err != nil {
			return RetryTemplateRef{}, err
		}
		c := cands[0] // only the C3L file: the global fallback directory is not part of the retry lookup
		out.Tried = append(out.Tried, r.rel(c.abs))
		t, err := r.load(c)
		if err == errNotFound {
			continue
		}
		if err != nil {
			return RetryTemplateRef{}, err
		}
		out.Found = true
		out.Text = t.body
		out.Path = c.abs
		if t.frontmatter != nil {
			out.Frontmatter = maps.Clone(t.frontmatter)
			out.Params = stringList(t.frontmatter["params"])
		}
		if i > 0 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("retry prompt %s not found; using %s", out.Tried[0], out.Tried[i]))
		}
		return out, nil
	}
	return out, nil
}

// stringList returns v as a list of strings when it is one.
func stringList(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}
