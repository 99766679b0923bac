package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
)

// CatalogConfig configures a Catalog.
type CatalogConfig struct {
	// BaseDir resolves relative skill folders (the agent directory).
	BaseDir string
	// FS, when set, is the pinned definition of the agent in BaseDir
	// (paths relative to it): the skills' SKILL.md files are read from it,
	// so their names, descriptions and instructions are those the run
	// started with. Their other files are read from disk.
	FS fs.FS
	// Sandbox runs skill scripts; nil disables run_skill_script's effect
	// (it answers SANDBOX_UNAVAILABLE).
	Sandbox *sandbox.Runner
	// ScriptTimeout bounds one script (default 20s).
	ScriptTimeout time.Duration
}

// Catalog exposes skills to agent runs (runner.skills) with progressive
// disclosure: SystemPromptSection is L1 (name + description of every
// skill), activate_skill discloses L2 (the SKILL.md body, once), and
// read_skill_file / run_skill_script give L3 on demand.
type Catalog struct {
	cfg    CatalogConfig
	skills []Skill
	byName map[string]*Skill

	mu     sync.Mutex
	active map[string]string // skill name → hash of the body disclosed
}

// NewCatalog discovers the skills in dirs (each a folder of skill folders,
// or a skill folder itself). Names must be unique; on a collision the first
// folder wins and a warning says so.
func NewCatalog(dirs []string, cfg CatalogConfig) (*Catalog, []Warning) {
	c := &Catalog{cfg: cfg, byName: map[string]*Skill{}, active: map[string]string{}}
	var warns []Warning
	files := pinnedSkillFiles(cfg.FS, cfg.BaseDir)
	for _, d := range dirs {
		if !filepath.IsAbs(d) && cfg.BaseDir != "" {
			d = filepath.Join(cfg.BaseDir, d)
		}
		found, ws := discover(d, files)
		warns = append(warns, ws...)
		for _, sk := range found {
			if prev := c.byName[sk.Name]; prev != nil {
				warns = append(warns, Warning{SkillID: sk.ID, File: sk.Root, Code: "name_collision",
					Message: fmt.Sprintf("skill name %q is also used by %s; the first one is kept", sk.Name, prev.Root)})
				continue
			}
			c.skills = append(c.skills, sk)
			c.byName[sk.Name] = &c.skills[len(c.skills)-1]
		}
	}
	// Rebuild the index: appends may have moved the backing array.
	for i := range c.skills {
		c.byName[c.skills[i].Name] = &c.skills[i]
	}
	return c, warns
}

// Skills returns the catalog's skills.
func (c *Catalog) Skills() []Skill { return c.skills }

// SystemPromptSection is the L1 disclosure for the system prompt: every
// skill's name, description and location, in the <available_skills> form.
// It is "" when there are no skills.
func (c *Catalog) SystemPromptSection() string {
	if len(c.skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("The following skills provide specialized instructions and resources. When a task matches a skill's description, call activate_skill with its name to load its full instructions, then use read_skill_file and run_skill_script for the files they mention.\n<available_skills>\n")
	for _, sk := range c.skills {
		fmt.Fprintf(&b, "<skill><name>%s</name><description>%s</description><location>%s</location></skill>\n",
			html.EscapeString(sk.Name), html.EscapeString(sk.Description), html.EscapeString(filepath.Join(sk.Root, sk.File)))
	}
	b.WriteString("</available_skills>\n")
	return b.String()
}

// Tools returns the catalog's tools: activate_skill (read), read_skill_file
// (read) and run_skill_script (execute, sandboxed).
func (c *Catalog) Tools() []tool.Tool {
	if len(c.skills) == 0 {
		return nil
	}
	names := make([]string, len(c.skills))
	for i, sk := range c.skills {
		names[i] = sk.Name
	}
	sort.Strings(names)
	enum, _ := json.Marshal(names)
	return []tool.Tool{
		&catalogTool{c: c, kind: tool.KindRead, run: c.activate, spec: tool.Spec{
			Name:        "activate_skill",
			Description: "Load a skill's full instructions (SKILL.md) and the list of its files.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","enum":` + string(enum) + `}},"required":["name"],"additionalProperties":false}`),
		}},
		&catalogTool{c: c, kind: tool.KindRead, run: c.readFile, spec: tool.Spec{
			Name:        "read_skill_file",
			Description: "Read a file of an activated skill (path relative to the skill folder). Scripts are summarized; run them with run_skill_script.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"skill":{"type":"string","enum":` + string(enum) + `},"path":{"type":"string"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}},"required":["skill","path"],"additionalProperties":false}`),
		}},
		&catalogTool{c: c, kind: tool.KindExecute, run: c.runScript, spec: tool.Spec{
			Name:        "run_skill_script",
			Description: "Run a skill script (.sh .py .js) in the sandbox (no network; writes only in the skill's build/). args: {\"argv\": [...], \"stdin\": ...}. Returns its JSON output.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"skill":{"type":"string","enum":` + string(enum) + `},"path":{"type":"string"},"args":{"type":"object"}},"required":["skill","path"],"additionalProperties":false}`),
		}},
	}
}

type catalogTool struct {
	c    *Catalog
	spec tool.Spec
	kind tool.Kind
	run  func(ctx context.Context, input json.RawMessage) (string, error)
}

// Spec describes the tool.
func (t *catalogTool) Spec() tool.Spec { return t.spec }

// Kind classifies the tool for permission modes.
func (t *catalogTool) Kind() tool.Kind { return t.kind }

// Run executes the call; failures are error results with a coded message.
func (t *catalogTool) Run(ctx context.Context, input json.RawMessage) (tool.Result, error) {
	out, err := t.run(ctx, input)
	if err != nil {
		e := agenterr.From(err)
		if e == nil {
			return tool.Result{Content: err.Error(), IsError: true}, nil
		}
		msg := e.Code + ": " + e.Message
		if e.Err != nil {
			msg += ": " + e.Err.Error()
		}
		if e.Hint != "" {
			msg += " (hint: " + e.Hint + ")"
		}
		return tool.Result{Content: msg, IsError: true}, nil
	}
	return tool.Result{Content: out}, nil
}

func (c *Catalog) skill(name string) (*Skill, error) {
	sk := c.byName[name]
	if sk == nil {
		return nil, agenterr.New(agenterr.CodeSkillNotFound, agenterr.LayerSkill, true, "no skill named %q", name)
	}
	return sk, nil
}

func (c *Catalog) activate(_ context.Context, input json.RawMessage) (string, error) {
	in, err := decode[struct {
		Name string `json:"name"`
	}](input)
	if err != nil {
		return "", err
	}
	sk, err := c.skill(in.Name)
	if err != nil {
		return "", err
	}
	h := hashBytes([]byte(sk.Body))
	c.mu.Lock()
	prev := c.active[sk.Name]
	c.active[sk.Name] = h
	c.mu.Unlock()
	if prev == h {
		return fmt.Sprintf("skill %q is already active; its instructions are unchanged since they were loaded (hash %s)", sk.Name, h), nil
	}
	body := sk.Body
	if len(body) > maxInjectChars {
		body = body[:maxInjectChars] + fmt.Sprintf("\n[… SKILL.md continues (%d lines); read more with read_skill_file path=%q offset=N]", sk.BodyLines, sk.File)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<skill_content name=%q>\n%s\n</skill_content>\n<skill_resources>\n", sk.Name, body)
	files := listSkillFiles(sk.Root)
	paths := make([]string, 0, len(files))
	for p := range files {
		if p != sk.File {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for i, p := range paths {
		if i == 50 {
			fmt.Fprintf(&b, "… and %d more\n", len(paths)-50)
			break
		}
		b.WriteString(p + "\n")
	}
	b.WriteString("</skill_resources>\n")
	for _, r := range sk.References {
		if !r.Exists {
			fmt.Fprintf(&b, "Note: SKILL.md refers to %s, which the skill does not contain.\n", r.Path)
		}
	}
	return b.String(), nil
}

func (c *Catalog) readFile(_ context.Context, input json.RawMessage) (string, error) {
	in, err := decode[struct {
		Skill  string `json:"skill"`
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}](input)
	if err != nil {
		return "", err
	}
	sk, err := c.skill(in.Skill)
	if err != nil {
		return "", err
	}
	p := in.Path
	for _, r := range sk.References {
		if r.Text == p && r.Exists {
			p = r.Path
		}
	}
	full, err := sandbox.ResolveInside(sk.Root, p)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(full); err != nil || fi.IsDir() {
		e := agenterr.New(agenterr.CodeSkillMissingReference, agenterr.LayerSkill, true, "skill %q has no file %q", sk.Name, p)
		e.Hint = "activate_skill lists the skill's files"
		return "", e
	}
	fields, _, err := describeFile(full, p, in.Offset, in.Limit)
	if err != nil {
		return "", agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "read %q", p)
	}
	fields["path"] = p
	b, _ := json.Marshal(fields)
	return string(b), nil
}

func (c *Catalog) runScript(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := decode[struct {
		Skill string          `json:"skill"`
		Path  string          `json:"path"`
		Args  json.RawMessage `json:"args"`
	}](input)
	if err != nil {
		return "", err
	}
	sk, err := c.skill(in.Skill)
	if err != nil {
		return "", err
	}
	if c.cfg.Sandbox == nil {
		e := agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false, "no sandbox is configured; skill scripts cannot run")
		e.Hint = "enable runner.boundaries.sandbox on a Linux host with user namespaces and Landlock"
		return "", e
	}
	timeout := c.cfg.ScriptTimeout
	if timeout <= 0 {
		timeout = time.Duration(defaultBudgets.ScriptTimeoutS) * time.Second
	}
	sr, err := c.cfg.Sandbox.RunScript(ctx, sandbox.ScriptSpec{Root: sk.Root, Path: in.Path, Args: in.Args, Timeout: timeout,
		Limits: sandbox.Limits{CPUSeconds: int(timeout / time.Second)}})
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(scriptFields(sr.Script, &sr))
	if sr.Status != sandbox.StatusOK {
		e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "%s", b)
		return "", e
	}
	return string(b), nil
}
