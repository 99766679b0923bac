// Package skill implements Agent Skills for capstan: discovery and lenient
// parsing of SKILL.md folders (the agentskills.io format), the skill
// runtime (the loop that lets a model drive one skill to validated outputs
// under budgets), and a Catalog that exposes skills to agent runs with
// progressive disclosure.
package skill

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
	"github.com/capstan-dev/capstan/sandbox"
)

// Limits of the format (agentskills.io specification) that produce warnings.
const (
	MaxNameLen        = 64
	MaxDescriptionLen = 1024 // runes
	MaxBodyLines      = 500
	MaxBodyTokens     = 5000
	maxScanDepth      = 6
	maxScanDirs       = 2000
)

// Skill is one parsed skill folder.
type Skill struct {
	// ID is the folder's path relative to the directory that was scanned,
	// with forward slashes ("document-skills/pptx").
	ID string `json:"id"`
	// Name and Description are the L1 metadata.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Optional frontmatter fields of the format.
	License       string            `json:"license,omitempty"`
	Compatibility string            `json:"compatibility,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	AllowedTools  string            `json:"allowed_tools,omitempty"`
	// Extra holds frontmatter keys the format does not define.
	Extra map[string]any `json:"extra,omitempty"`
	// Root is the absolute, symlink-free path of the skill folder.
	Root string `json:"root"`
	// File is the name of the skill file inside Root ("SKILL.md").
	File string `json:"file"`
	// Body is the Markdown after the frontmatter (the L2 content).
	Body       string `json:"-"`
	BodyLines  int    `json:"body_lines"`
	BodyTokens int    `json:"body_tokens"`
	// References are the files the body points at, resolved in Root.
	References []Reference `json:"references,omitempty"`
}

// Reference is a file mentioned by SKILL.md.
type Reference struct {
	// Text is how the body wrote it.
	Text string `json:"text"`
	// Path is the resolved path relative to the skill root (Text when
	// missing).
	Path string `json:"path"`
	// Exists is false for a missing reference.
	Exists bool `json:"exists"`
	// How says how it was resolved: "exact", "case-insensitive",
	// "basename" or "missing".
	How string `json:"how"`
}

// Warning is a quirk found while loading a skill. Skills with warnings are
// still loaded unless the warning says "skipped".
type Warning struct {
	SkillID string `json:"skill_id"`
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Skipped bool   `json:"skipped,omitempty"`
}

// Warning codes.
const (
	WarnSkippedParse       = "skipped_unparseable"
	WarnSkippedNoDesc      = "skipped_no_description"
	WarnNameMismatch       = "name_mismatch"
	WarnNameFormat         = "name_format"
	WarnDescriptionLong    = "description_too_long"
	WarnBodyLong           = "body_too_long"
	WarnMissingReference   = "missing_reference"
	WarnReferenceCase      = "reference_case_mismatch"
	WarnUnknownField       = "unknown_field"
	WarnQuotedRetry        = "frontmatter_quoted_retry"
	WarnScanLimit          = "scan_limit"
	WarnReferenceEscapes   = "reference_outside_root"
	WarnCompatibilityLong  = "compatibility_too_long"
	WarnMetadataNotStrings = "metadata_not_strings"
)

// String renders "file:line:col: code: message".
func (w Warning) String() string {
	loc := w.File
	if w.Line > 0 {
		loc += fmt.Sprintf(":%d", w.Line)
		if w.Column > 0 {
			loc += fmt.Sprintf(":%d", w.Column)
		}
	}
	return fmt.Sprintf("%s: %s: %s", loc, w.Code, w.Message)
}

// Frontmatter is the parsed YAML header of a SKILL.md.
type Frontmatter struct {
	Name          string
	Description   string
	License       string
	Compatibility string
	Metadata      map[string]string
	AllowedTools  string
	Extra         map[string]any
	// Quoted is true when the YAML only parsed after quoting values that
	// contain ": " (a common authoring mistake).
	Quoted bool
}

var knownFields = map[string]bool{"name": true, "description": true, "license": true, "compatibility": true, "metadata": true, "allowed-tools": true}

// ParseError is a SKILL.md that cannot be used, with its position.
type ParseError struct {
	Line, Column int
	Msg          string
}

// Error renders "line:col: message".
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
	}
	return e.Msg
}

// Parse splits a SKILL.md into frontmatter and body by the rule of package
// frontmatter (after a UTF-8 BOM is stripped and CRLF line endings are
// normalized to LF, body included); the frontmatter is required, and must
// be closed. Line numbers in a
// *ParseError are 1-based lines of the file.
func Parse(data []byte) (Frontmatter, string, error) {
	var fm Frontmatter
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !utf8.ValidString(text) {
		return fm, "", &ParseError{Msg: "SKILL.md is not valid UTF-8"}
	}
	block, err := yamlsafe.SplitFrontmatter(text)
	if err != nil {
		return fm, "", &ParseError{Line: 1, Column: 1, Msg: "frontmatter is not closed by a '---' line"}
	}
	if !block.Present {
		return fm, "", &ParseError{Line: 1, Column: 1, Msg: "no YAML frontmatter: the file must start with a '---' line"}
	}
	yml, body := block.YAML, block.Body
	raw, quoted, err := parseYAML(yml)
	if err != nil {
		return fm, "", err
	}
	fm.Quoted = quoted
	fm.Extra = map[string]any{}
	for k, v := range raw {
		switch k {
		case "name":
			fm.Name = scalarString(v)
		case "description":
			fm.Description = scalarString(v)
		case "license":
			fm.License = scalarString(v)
		case "compatibility":
			fm.Compatibility = scalarString(v)
		case "allowed-tools":
			if list, ok := v.([]any); ok {
				parts := make([]string, 0, len(list))
				for _, p := range list {
					parts = append(parts, scalarString(p))
				}
				fm.AllowedTools = strings.Join(parts, " ")
			} else {
				fm.AllowedTools = scalarString(v)
			}
		case "metadata":
			if m, ok := v.(map[string]any); ok {
				fm.Metadata = map[string]string{}
				for mk, mv := range m {
					fm.Metadata[mk] = scalarString(mv)
				}
			} else if v != nil {
				fm.Extra[k] = v
			}
		default:
			fm.Extra[k] = v
		}
	}
	return fm, body, nil
}

func scalarString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		return strings.TrimSpace(fmt.Sprint(x))
	}
}

var posRe = lazyre.New(`^\[(\d+):(\d+)\]\s*`)

// parseYAML decodes the frontmatter into a map. When that fails it retries
// once with values containing ": " quoted (the fallback the client
// guidelines suggest). Errors carry file line numbers (frontmatter line + 1).
func parseYAML(yml string) (map[string]any, bool, error) {
	raw := map[string]any{}
	if strings.TrimSpace(yml) == "" {
		return raw, false, nil
	}
	err := yamlsafe.Unmarshal([]byte(yml), &raw)
	if err == nil {
		return raw, false, nil
	}
	if fixed, ok := quoteColonValues(yml); ok {
		retry := map[string]any{}
		if yamlsafe.Unmarshal([]byte(fixed), &retry) == nil {
			return retry, true, nil
		}
	}
	pe := &ParseError{Msg: "invalid YAML frontmatter: " + err.Error()}
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		pe.Line = ye.GetToken().Position.Line + 1
		pe.Column = ye.GetToken().Position.Column
		pe.Msg = "invalid YAML frontmatter: " + ye.GetMessage()
	} else if m := posRe().FindStringSubmatch(err.Error()); m != nil {
		fmt.Sscanf(m[1], "%d", &pe.Line)
		fmt.Sscanf(m[2], "%d", &pe.Column)
		pe.Line++
	}
	return nil, false, pe
}

var topKeyRe = lazyre.New(`^([A-Za-z0-9_-]+):[ \t]+(.+)$`)

// quoteColonValues double-quotes top-level plain scalar values that contain
// ": ". It reports whether anything changed.
func quoteColonValues(yml string) (string, bool) {
	lines := strings.Split(yml, "\n")
	changed := false
	for i, l := range lines {
		m := topKeyRe().FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v := m[2]
		if !strings.Contains(v, ": ") || strings.ContainsAny(v[:1], `"'|>[{&*!`) {
			continue
		}
		v = strings.ReplaceAll(v, `\`, `\\`)
		v = strings.ReplaceAll(v, `"`, `\"`)
		lines[i] = m[1] + `: "` + v + `"`
		changed = true
	}
	return strings.Join(lines, "\n"), changed
}

var nameRe = lazyre.New(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// EstimateTokens approximates a token count (≈ 4 characters per token).
func EstimateTokens(s string) int {
	return (utf8.RuneCountInString(s) + 3) / 4
}

// Load parses the skill in folder root (which must hold SKILL.md or
// skill.md); id is its catalog id. A skill that cannot be used (no
// frontmatter, unparseable YAML, no description) is an error coded
// SKILL_PARSE or SKILL_NOT_FOUND with the file position; quirks are
// returned as warnings.
func Load(root, id string) (*Skill, []Warning, error) {
	return load(root, id, skillFiles{})
}

// skillFiles reads SKILL.md files from the disk or, with fsys set, from a
// pinned agent definition (paths relative to dir, the agent folder), so
// that a skill's instructions are those the run started with. A skill's
// other files (resources, scripts) are always on disk.
type skillFiles struct {
	fsys fs.FS
	dir  string // absolute, symlinks resolved
}

// pinnedSkillFiles reads SKILL.md files from fsys, the pinned definition
// of the agent in dir; a nil fsys reads the disk.
func pinnedSkillFiles(fsys fs.FS, dir string) skillFiles {
	if fsys == nil {
		return skillFiles{}
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
	}
	return skillFiles{fsys: fsys, dir: abs}
}

// name turns the absolute path p into a path of fsys.
func (f skillFiles) name(p string) (string, error) {
	rel, err := filepath.Rel(f.dir, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return filepath.ToSlash(rel), nil
}

func (f skillFiles) stat(p string) (fs.FileInfo, error) {
	if f.fsys == nil {
		return os.Stat(p)
	}
	name, err := f.name(p)
	if err != nil {
		return nil, err
	}
	return fs.Stat(f.fsys, name)
}

// read reads the file p, refusing one larger than max bytes (errTooLarge).
func (f skillFiles) read(p string, max int64) ([]byte, error) {
	var r io.ReadCloser
	if f.fsys == nil {
		file, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		r = file
	} else {
		name, err := f.name(p)
		if err != nil {
			return nil, err
		}
		if r, err = f.fsys.Open(name); err != nil {
			return nil, err
		}
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, max)
	}
	return data, nil
}

func load(root, id string, files skillFiles) (*Skill, []Warning, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	file, err := findSkillFile(root, abs, files)
	if err != nil {
		return nil, nil, err
	}
	if id == "" {
		id = filepath.Base(abs)
	}
	fm, body, err := parseSkillFile(id, filepath.Join(abs, file), path.Join(id, file), files)
	if err != nil {
		return nil, nil, err
	}
	sk := &Skill{
		ID: id, Name: fm.Name, Description: strings.TrimSpace(fm.Description),
		License: fm.License, Compatibility: fm.Compatibility, Metadata: fm.Metadata,
		AllowedTools: fm.AllowedTools, Root: abs, File: file, Body: body,
		BodyLines: strings.Count(body, "\n") + 1, BodyTokens: EstimateTokens(body),
	}
	if len(fm.Extra) > 0 {
		sk.Extra = fm.Extra
	}
	warns := frontmatterWarnings(sk, fm, path.Join(id, file))
	sk.References, warns = resolveReferences(sk, warns)
	return sk, warns, nil
}

// findSkillFile names the skill file of the folder abs (SKILL.md, or
// skill.md), or fails with a coded error naming root. A skill file that
// is a symbolic link leading out of the folder is refused (PATH_ESCAPE),
// as the skill's other files are: its description and instructions go to
// the model.
func findSkillFile(root, abs string, files skillFiles) (string, error) {
	for _, name := range []string{"SKILL.md", "skill.md"} {
		if fi, err := files.stat(filepath.Join(abs, name)); err == nil && fi.Mode().IsRegular() {
			if files.fsys == nil {
				if _, err := sandbox.ResolveInside(abs, name); err != nil {
					e := agenterr.New(agenterr.CodePathEscape, agenterr.LayerSkill, false,
						"%s is a symbolic link that leads outside the skill folder %s", name, root)
					e.File = filepath.Join(root, name)
					e.Hint = "replace the link with the file itself, or point it at a file inside the skill folder"
					return "", e
				}
			}
			return name, nil
		}
	}
	e := agenterr.New(agenterr.CodeSkillNotFound, agenterr.LayerSkill, false, "no SKILL.md in %s", root)
	e.File = root
	e.Hint = "a skill is a folder with a SKILL.md file"
	return "", e
}

// parseSkillFile reads the skill file at full and splits it into frontmatter
// and body; a file too large, without valid frontmatter or without a
// description is a coded error at fileRel.
func parseSkillFile(id, full, fileRel string, files skillFiles) (Frontmatter, string, error) {
	data, err := files.read(full, MaxSkillFileBytes)
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeSkillParse, agenterr.LayerSkill, false, "read %s", path.Base(fileRel))
		e.File = fileRel
		if errors.Is(err, errTooLarge) {
			e.Hint = fmt.Sprintf("keep SKILL.md under %d MiB: move long reference text into files the skill links to", MaxSkillFileBytes>>20)
		}
		return Frontmatter{}, "", e
	}
	fm, body, perr := Parse(data)
	if perr != nil {
		e := agenterr.Wrap(perr, agenterr.CodeSkillParse, agenterr.LayerSkill, false, "skill %q cannot be loaded", id)
		e.File = fileRel
		var pe *ParseError
		if errors.As(perr, &pe) {
			e.Line, e.Column = pe.Line, pe.Column
		}
		e.Hint = "start SKILL.md with '---', YAML with name and description, and '---'; quote values that contain ': '"
		return Frontmatter{}, "", e
	}
	if strings.TrimSpace(fm.Description) == "" {
		e := agenterr.New(agenterr.CodeSkillParse, agenterr.LayerSkill, false, "skill %q has no description", id)
		e.File = fileRel
		e.Pointer = "/description"
		e.Hint = "add a description saying what the skill does and when to use it"
		return Frontmatter{}, "", e
	}
	return fm, body, nil
}

// frontmatterWarnings checks a loaded skill against the Agent Skills format's
// recommendations (name, lengths, known keys); a skill without a name takes
// its folder's name.
func frontmatterWarnings(sk *Skill, fm Frontmatter, fileRel string) []Warning {
	var warns []Warning
	warn := func(code, format string, args ...any) {
		warns = append(warns, Warning{SkillID: sk.ID, File: fileRel, Code: code, Message: fmt.Sprintf(format, args...)})
	}
	if fm.Quoted {
		warn(WarnQuotedRetry, "the frontmatter only parsed after quoting values that contain ': '; quote them in the file")
	}
	base := filepath.Base(sk.Root)
	switch {
	case sk.Name == "":
		sk.Name = base
		warn(WarnNameFormat, "no name; using the folder name %q", base)
	case sk.Name != base:
		warn(WarnNameMismatch, "name %q does not match the folder name %q", sk.Name, base)
	}
	if utf8.RuneCountInString(sk.Name) > MaxNameLen || !nameRe().MatchString(sk.Name) {
		warn(WarnNameFormat, "name %q should be 1-%d lowercase letters, digits and single hyphens", sk.Name, MaxNameLen)
	}
	if n := utf8.RuneCountInString(sk.Description); n > MaxDescriptionLen {
		warn(WarnDescriptionLong, "description has %d characters (limit %d)", n, MaxDescriptionLen)
	}
	if utf8.RuneCountInString(sk.Compatibility) > 500 {
		warn(WarnCompatibilityLong, "compatibility has more than 500 characters")
	}
	if sk.BodyLines > MaxBodyLines || sk.BodyTokens > MaxBodyTokens {
		warn(WarnBodyLong, "body has %d lines / ~%d tokens (recommended < %d lines and < %d tokens); it is disclosed in parts", sk.BodyLines, sk.BodyTokens, MaxBodyLines, MaxBodyTokens)
	}
	keys := make([]string, 0, len(fm.Extra))
	for k := range fm.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		warn(WarnUnknownField, "frontmatter key %q is not part of the Agent Skills format; kept in extra", k)
	}
	return warns
}

// Discover finds every folder under dir that holds a SKILL.md and loads it.
// Skill ids are folder paths relative to dir. It skips .git, node_modules
// and build folders, does not look inside a skill's own folder for more
// skills, and bounds depth and folder count. Unusable skills are skipped
// with a warning; the rest load with warnings for their quirks.
func Discover(dir string) ([]Skill, []Warning) {
	return discover(dir, skillFiles{})
}

func discover(dir string, files skillFiles) ([]Skill, []Warning) {
	var skills []Skill
	var warns []Warning
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, []Warning{{File: dir, Code: WarnSkippedParse, Message: err.Error(), Skipped: true}}
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	seen := 0
	_ = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == abs {
				warns = append(warns, Warning{File: dir, Code: WarnSkippedParse, Message: err.Error(), Skipped: true})
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(abs, p)
		rel = filepath.ToSlash(rel)
		if p != abs {
			switch d.Name() {
			case ".git", "node_modules", "build", "__pycache__", ".capstan":
				return filepath.SkipDir
			}
			if strings.Count(rel, "/")+1 > maxScanDepth {
				return filepath.SkipDir
			}
		}
		seen++
		if seen > maxScanDirs {
			warns = append(warns, Warning{File: rel, Code: WarnScanLimit, Message: fmt.Sprintf("stopped after %d folders", maxScanDirs)})
			return filepath.SkipAll
		}
		hasSkill := false
		for _, name := range []string{"SKILL.md", "skill.md"} {
			if fi, err := files.stat(filepath.Join(p, name)); err == nil && fi.Mode().IsRegular() {
				hasSkill = true
			}
		}
		if !hasSkill {
			return nil
		}
		id := rel
		if id == "." {
			id = filepath.Base(abs)
		}
		sk, ws, err := load(p, id, files)
		warns = append(warns, ws...)
		if err != nil {
			w := Warning{SkillID: id, File: path.Join(id, "SKILL.md"), Message: err.Error(), Skipped: true, Code: WarnSkippedParse}
			if e := agenterr.From(err); e != nil {
				w.File, w.Line, w.Column = e.File, e.Line, e.Column
				if e.Pointer == "/description" {
					w.Code = WarnSkippedNoDesc
				}
			}
			warns = append(warns, w)
		} else {
			skills = append(skills, *sk)
		}
		// A skill's folder holds its resources, not more skills (also when
		// DIR itself is a skill folder, as runner.skills entries are).
		return filepath.SkipDir
	})
	sort.Slice(skills, func(i, j int) bool { return skills[i].ID < skills[j].ID })
	return skills, warns
}

// Find returns the skill with the given id (or, failing that, the given
// name) from skills.
func Find(skills []Skill, id string) (*Skill, error) {
	for i := range skills {
		if skills[i].ID == id {
			return &skills[i], nil
		}
	}
	for i := range skills {
		if skills[i].Name == id {
			return &skills[i], nil
		}
	}
	ids := make([]string, len(skills))
	for i, s := range skills {
		ids[i] = s.ID
	}
	e := agenterr.New(agenterr.CodeSkillNotFound, agenterr.LayerSkill, false, "no skill %q", id)
	e.Hint = "available: " + strings.Join(ids, ", ")
	if len(ids) == 0 {
		e.Hint = "the directory holds no usable skill (capstan skills list DIR shows why)"
	}
	return nil, e
}

// Hash is a digest of every file of the skill except build/, so a change to
// any instruction, template, script or schema changes it.
func (s *Skill) Hash() string {
	h := sha256.New()
	_ = filepath.WalkDir(s.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(s.Root, p)
		if d.IsDir() {
			if rel == "build" || d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := readRegular(p)
		if err != nil {
			return nil
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// refRe finds candidate file references in a body: Markdown link targets and
// path-like tokens with a file extension.
var (
	linkRe  = lazyre.New(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	tokenRe = lazyre.New(`(?:^|[\s` + "`" + `'"(\[])((?:\.{0,2}/)?[A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:md|py|sh|js|mjs|ts|json|ya?ml|txt|tmpl|tpl|gotmpl|hbs|html|css|csv|xsd|xml|toml))\b`)
)

// resolveReferences extracts and resolves the files the body mentions.
func resolveReferences(sk *Skill, warns []Warning) ([]Reference, []Warning) {
	var cands []string
	seen := map[string]bool{}
	add := func(s string) {
		s = strings.TrimSpace(s)
		if i := strings.IndexAny(s, "#?"); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimPrefix(s, "./")
		if s == "" || seen[s] || strings.Contains(s, "://") || strings.HasPrefix(s, "mailto:") {
			return
		}
		seen[s] = true
		cands = append(cands, s)
	}
	for _, line := range strings.Split(sk.Body, "\n") {
		for _, m := range linkRe().FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
		for _, m := range tokenRe().FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
	}
	files := listSkillFiles(sk.Root)
	var refs []Reference
	fileRel := path.Join(sk.ID, sk.File)
	for _, c := range cands {
		if c == sk.File || strings.HasPrefix(c, "build/") {
			continue // outputs the skill produces, not files it provides
		}
		clean := path.Clean(c)
		if strings.HasPrefix(clean, "../") || clean == ".." || strings.HasPrefix(clean, "/") {
			warns = append(warns, Warning{SkillID: sk.ID, File: fileRel, Code: WarnReferenceEscapes, Message: fmt.Sprintf("reference %q points outside the skill folder; it will not be readable", c)})
			continue
		}
		ref := Reference{Text: c, Path: clean, How: "missing"}
		if files[clean] {
			ref.Exists, ref.How = true, "exact"
		} else if m := matchFold(files, clean); m != "" {
			ref.Path, ref.Exists, ref.How = m, true, "case-insensitive"
			warns = append(warns, Warning{SkillID: sk.ID, File: fileRel, Code: WarnReferenceCase, Message: fmt.Sprintf("reference %q matches %q only case-insensitively", c, m)})
		} else if m := matchBase(files, clean); m != "" {
			ref.Path, ref.Exists, ref.How = m, true, "basename"
		} else {
			warns = append(warns, Warning{SkillID: sk.ID, File: fileRel, Code: WarnMissingReference, Message: fmt.Sprintf("reference %q does not exist in the skill folder", c)})
		}
		refs = append(refs, ref)
	}
	return refs, warns
}

// listSkillFiles returns the skill's files (relative, slash-separated),
// excluding build/.
func listSkillFiles(root string) map[string]bool {
	files := map[string]bool{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "build" || d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if len(files) < 10000 {
			files[rel] = true
		}
		return nil
	})
	return files
}

func matchFold(files map[string]bool, p string) string {
	found := ""
	for f := range files {
		if strings.EqualFold(f, p) {
			if found != "" {
				return ""
			}
			found = f
		}
	}
	return found
}

func matchBase(files map[string]bool, p string) string {
	if strings.Contains(p, "/") {
		return ""
	}
	found := ""
	for f := range files {
		if path.Base(f) == p {
			if found != "" {
				return ""
			}
			found = f
		}
	}
	return found
}

// MaxSkillFileBytes bounds SKILL.md, as prompt files are bounded: its
// metadata goes into every system prompt and its body into the context.
const MaxSkillFileBytes = 4 << 20

var errTooLarge = errors.New("file too large")
