package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/gotmpl"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
	"github.com/capstan-dev/capstan/sandbox"
	jschema "github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/tool"
)

// Size caps of what tools put into the model's context.
const (
	maxInjectChars   = 20000 // one read (≈ 5k tokens)
	maxListFiles     = 200
	maxGlobFiles     = 10
	maxTemplateBytes = 1 << 20
	maxRawOutput     = 4000
)

// toolOutput is one tool call's outcome plus what the runtime records.
type toolOutput struct {
	content string
	isError bool
	errText string
	diff    string
	files   []string
	level   string // "L2" / "L3" when content was disclosed
	cached  bool
	refused bool   // the runtime refused the call without running it (AttemptMemo, retry budget)
	changed bool   // the call made progress (new content, new artifact, new value)
	stderr  string // a script's summarized stderr, for the evidence
}

func success(v map[string]any) toolOutput {
	v["ok"] = true
	b, err := json.Marshal(v)
	if err != nil {
		return failure(agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "encode result"))
	}
	return toolOutput{content: string(b)}
}

func failure(err error) toolOutput {
	e := agenterr.From(err)
	if e == nil {
		e = agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "tool failed")
	}
	msg := e.Message
	if e.Err != nil {
		if msg != "" {
			msg += ": "
		}
		msg += e.Err.Error()
	}
	return toolOutput{content: errorContent(e.Code, msg, e.Hint), isError: true, errText: e.Code + ": " + msg}
}

// actTool is one tool of the Act runtime.
type actTool struct {
	spec tool.Spec
	kind tool.Kind
	run  func(s *session, ctx context.Context, input json.RawMessage) toolOutput
	// state, when set, adds the state the call depends on (file contents)
	// to the AttemptMemo key, so an action that failed may be retried once
	// what it depends on changed.
	state func(s *session, input json.RawMessage) string
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

func decode[T any](input json.RawMessage) (T, error) {
	var v T
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		e := agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "bad tool input")
		e.Hint = "follow the tool's input schema"
		return v, e
	}
	return v, nil
}

// tools returns the tools of seed 001 §7.
func (s *session) tools() []*actTool {
	return []*actTool{
		{spec: tool.Spec{Name: "readSkillMd", Description: "Load the skill's SKILL.md instructions (L2). Call once; a second call only confirms it is unchanged.", InputSchema: schema(``)}, kind: tool.KindRead, run: (*session).readSkillMd},
		{spec: tool.Spec{Name: "readRef", Description: "Read a file SKILL.md refers to: a relative link (\"forms.md\", \"reference.md#section\"), an explicit path, or a glob (\"references/*.md\"). Scripts are summarized, not shown; run them with runScript.", InputSchema: schema(`"path":{"type":"string"}`, "path")}, kind: tool.KindRead, run: (*session).readRef},
		{spec: tool.Spec{Name: "listFiles", Description: "List the skill's files (and build/ outputs) matching an optional glob such as \"**/*.md\".", InputSchema: schema(`"glob":{"type":"string"}`)}, kind: tool.KindRead, run: (*session).listFiles},
		{spec: tool.Spec{Name: "readFile", Description: "Read one file of the skill or of build/ (text: lines offset..offset+limit; scripts: a summary; binary: metadata).", InputSchema: schema(`"path":{"type":"string"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}`, "path")}, kind: tool.KindRead, run: (*session).readFile},
		{spec: tool.Spec{Name: "templateExpand", Description: "Expand a Go text/template file of the skill with JSON data (default: the run's inputs). With output, write the result to build/<output>.", InputSchema: schema(`"template":{"type":"string"},"data":{},"output":{"type":"string"}`, "template")}, kind: tool.KindEdit, run: (*session).templateExpand, state: (*session).buildState},
		{spec: tool.Spec{Name: "validate", Description: "Validate a build/ file or a JSON object against a JSON Schema (a schema file of the skill, or an inline schema) and/or rules {non_empty, contains, not_contains, matches, json, max_bytes}.", InputSchema: schema(`"schema":{},"rules":{"type":"object"},"path":{"type":"string"},"object":{}`)}, kind: tool.KindRead, run: (*session).validateTool, state: (*session).buildState},
		{spec: tool.Spec{Name: "runScript", Description: "Run a skill script (.sh .py .js) in the sandbox: no network, cwd = skill root, writes only in build/. args: {\"argv\": [...], \"stdin\": ...}; without stdin the args object is piped as JSON. Returns the parsed JSON stdout.", InputSchema: schema(`"path":{"type":"string"},"args":{"type":"object"}`, "path")}, kind: tool.KindExecute, run: (*session).runScript, state: (*session).buildState},
		{spec: tool.Spec{Name: "writeArtifact", Description: "Write a file under build/ (path relative to build/). Give content (text) or json (any value, written pretty-printed). Each write is a new version act.<artifact>@vN.", InputSchema: schema(`"path":{"type":"string"},"content":{"type":"string"},"json":{}`, "path")}, kind: tool.KindEdit, run: (*session).writeArtifact},
		{spec: tool.Spec{Name: "summarize", Description: "Summarize a file (skill or build/) or a text: headings, first sentences, JSON keys.", InputSchema: schema(`"path":{"type":"string"},"text":{"type":"string"},"max_lines":{"type":"integer","minimum":1}`)}, kind: tool.KindRead, run: (*session).summarize},
		{spec: tool.Spec{Name: "diff", Description: "Compare two files (skill or build/) line by line.", InputSchema: schema(`"a":{"type":"string"},"b":{"type":"string"}`, "a", "b")}, kind: tool.KindRead, run: (*session).diffTool},
		{spec: tool.Spec{Name: "blackboardPut", Description: "Store a value on the run's blackboard.", InputSchema: schema(`"key":{"type":"string"},"value":{}`, "key", "value")}, kind: tool.KindRead, run: (*session).bbPut},
		{spec: tool.Spec{Name: "blackboardGet", Description: "Read a value from the run's blackboard (all keys when key is empty).", InputSchema: schema(`"key":{"type":"string"}`)}, kind: tool.KindRead, run: (*session).bbGet},
		{spec: tool.Spec{Name: "finalize", Description: "Finish: the runtime validates every expected output. If something is unmet you get the list and may continue.", InputSchema: schema(`"summary":{"type":"string"}`)}, kind: tool.KindRead, run: (*session).finalize, state: (*session).buildState},
	}
}

// pathErr turns a path error into a tool failure; a PATH_ESCAPE also marks
// the run as violating the sandbox rules.
func (s *session) pathErr(err error) toolOutput {
	if agenterr.CodeOf(err) == agenterr.CodePathEscape {
		s.violation = err.Error()
	}
	return failure(err)
}

// resolveRead resolves a path of the skill, or of the build directory when
// it starts with "build/".
func (s *session) resolveRead(rel string) (string, string, error) {
	rel = strings.TrimPrefix(filepath.ToSlash(strings.TrimSpace(rel)), "./")
	if rest, ok := strings.CutPrefix(rel, "build/"); ok {
		p, err := sandbox.ResolveInside(s.build, rest)
		return p, "build/" + rest, err
	}
	p, err := sandbox.ResolveInside(s.sk.Root, rel)
	return p, rel, err
}

// resolveBuild resolves a path relative to the build directory (a leading
// "build/" is accepted).
func (s *session) resolveBuild(rel string) (string, error) {
	rel = strings.TrimPrefix(filepath.ToSlash(strings.TrimSpace(rel)), "./")
	rel = strings.TrimPrefix(rel, "build/")
	return sandbox.ResolveInside(s.build, rel)
}

func (s *session) isReference(rel string) bool {
	for _, r := range s.sk.References {
		if r.Path == rel || r.Text == rel {
			return true
		}
	}
	return false
}

func (s *session) missingErr(rel string) error {
	if s.isReference(rel) {
		s.missing[rel] = true
		e := agenterr.New(agenterr.CodeSkillMissingReference, agenterr.LayerSkill, true, "SKILL.md refers to %q but the skill does not contain it", rel)
		e.Hint = "generate what it would have provided yourself, once (writeArtifact / templateExpand); otherwise finalize and it is reported as unmet"
		return e
	}
	e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "no file %q in the skill", rel)
	e.Hint = "use listFiles to see the skill's files"
	return e
}

// inject applies the read cache: content already injected unchanged is
// replaced by a short note. It returns the fields to send and whether new
// content was injected.
func (s *session) inject(rel, level string, content string, fields map[string]any) (map[string]any, bool) {
	h := hashBytes([]byte(content))
	tokens := EstimateTokens(content)
	if prev, ok := s.readCache[rel]; ok && prev == h {
		s.metrics.Disclosure.CacheHits++
		s.metrics.Disclosure.TokensSaved += tokens
		return map[string]any{"path": rel, "unchanged": true, "hash": h, "note": "unchanged since last read (hash " + h + ")"}, false
	}
	if other, ok := s.injected[h]; ok && other != rel {
		s.readCache[rel] = h
		s.metrics.Disclosure.CacheHits++
		s.metrics.Disclosure.TokensSaved += tokens
		return map[string]any{"path": rel, "unchanged": true, "hash": h, "note": "identical to " + other + ", already read (hash " + h + ")"}, false
	}
	// Disclosure degradation: when the content would take more than a
	// quarter of the tokens left, send an extractive summary instead (and
	// do not cache it as read, so a later windowed read is not refused).
	left := s.budgets.TokenBudget - s.usage.Total()
	if key := textKey(fields); key != "" && tokens > 200 && int64(tokens) > left/4 {
		sum := Summarize(rel, content, 40)
		fields[key] = sum
		fields["degraded"] = fmt.Sprintf("token budget low (%d left): this is a summary of %d tokens of text; read parts with readFile offset/limit", max(left, 0), tokens)
		s.metrics.Disclosure.Degraded++
		tokens = EstimateTokens(sum)
	} else {
		s.readCache[rel] = h
		s.injected[h] = rel
	}
	switch level {
	case "L2":
		s.metrics.Disclosure.L2Tokens += tokens
	case "L3":
		s.metrics.Disclosure.L3Tokens += tokens
		s.metrics.Disclosure.L3Files++
	}
	fields["path"] = rel
	fields["hash"] = h
	return fields, true
}

// textKey names the field holding disclosed text ("body" for SKILL.md,
// "content" for text files), or "" for scripts and binaries.
func textKey(fields map[string]any) string {
	if _, ok := fields["body"]; ok {
		return "body"
	}
	if fields["kind"] == "text" {
		return "content"
	}
	return ""
}

func (s *session) readSkillMd(_ context.Context, _ json.RawMessage) toolOutput {
	body := s.sk.Body
	fields := map[string]any{"name": s.sk.Name, "description": s.sk.Description}
	truncated := false
	if len(body) > maxInjectChars {
		cut := maxInjectChars
		for cut > 0 && !utf8.RuneStart(body[cut]) {
			cut--
		}
		body = body[:cut]
		truncated = true
		fields["note"] = fmt.Sprintf("SKILL.md is long (%d lines); this is the beginning. Read more with readFile {\"path\": %q, \"offset\": %d}.", s.sk.BodyLines, s.sk.File, strings.Count(body, "\n"))
	}
	fields["body"] = body
	var refs, missing []string
	for _, r := range s.sk.References {
		if r.Exists {
			refs = append(refs, r.Path)
		} else {
			missing = append(missing, r.Path)
			s.missing[r.Path] = true
		}
	}
	fields["references"] = refs
	if len(missing) > 0 {
		fields["missing_references"] = missing
		fields["missing_note"] = "these referenced files do not exist: generate what they would have provided yourself, once; otherwise finalize and they are reported as unmet"
	}
	fields["truncated"] = truncated
	out, fresh := s.inject(s.sk.File, "L2", body, fields)
	res := success(out)
	res.level = "L2"
	res.files = []string{s.sk.File}
	res.changed = fresh
	res.cached = !fresh
	return res
}

var scriptExts = map[string]bool{".py": true, ".sh": true, ".js": true, ".mjs": true, ".ts": true, ".rb": true, ".pl": true}

// describeFile renders one file for the model: text content (a line
// window), a script summary, or binary metadata.
func describeFile(full, rel string, offset, limit int) (map[string]any, string, error) {
	data, err := readRegular(full)
	if err != nil {
		return nil, "", err
	}
	h := hashBytes(data)
	ext := strings.ToLower(path.Ext(rel))
	switch {
	case isBinary(data):
		return map[string]any{"kind": "binary", "bytes": len(data), "hash": h}, "binary:" + h, nil
	case scriptExts[ext]:
		sum := summarizeScript(string(data))
		return map[string]any{"kind": "script", "bytes": len(data), "lines": strings.Count(string(data), "\n") + 1,
			"summary": sum, "note": "scripts are run, not read: use runScript with this path"}, sum, nil
	}
	lines := strings.Split(string(data), "\n")
	if limit <= 0 {
		limit = 400
	}
	if offset > len(lines) {
		offset = len(lines)
	}
	end := min(len(lines), offset+limit)
	text := strings.Join(lines[offset:end], "\n")
	if len(text) > maxInjectChars {
		cut := maxInjectChars
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
		end = offset + strings.Count(text, "\n")
	}
	f := map[string]any{"kind": "text", "content": text, "lines": len(lines)}
	if offset > 0 || end < len(lines) {
		f["window"] = fmt.Sprintf("lines %d-%d of %d", offset+1, end, len(lines))
		if end < len(lines) {
			f["next_offset"] = end
		}
	}
	return f, text, nil
}

func isBinary(b []byte) bool {
	n := min(len(b), 8000)
	return bytes.IndexByte(b[:n], 0) >= 0 || !utf8.Valid(b[:n-trailingPartial(b[:n])])
}

// trailingPartial counts bytes of an incomplete UTF-8 sequence at the end.
func trailingPartial(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// fileStamp identifies a file version by content hash and modification
// time, so a script that rewrites a file with identical content still
// counts as producing it.
func fileStamp(p string, b []byte) string {
	st := hashBytes(b)
	if fi, err := os.Stat(p); err == nil {
		st += "@" + fi.ModTime().UTC().Format(time.RFC3339Nano)
	}
	return st
}

// summarizeScript keeps a script's leading comments / docstring and its
// usage lines: what a model needs to call it, not the code.
func summarizeScript(src string) string {
	var keep []string
	for i, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		if i == 0 && strings.HasPrefix(t, "#!") {
			continue
		}
		low := strings.ToLower(t)
		if strings.HasPrefix(t, "#") || strings.HasPrefix(t, "//") || strings.HasPrefix(t, `"""`) || strings.HasPrefix(t, "'''") ||
			strings.Contains(low, "usage") || strings.Contains(low, "add_argument") || strings.Contains(low, "sys.argv") || strings.Contains(low, "process.argv") {
			keep = append(keep, truncate(t, 160))
		}
		if len(keep) >= 12 {
			break
		}
	}
	return strings.Join(keep, "\n")
}

func (s *session) readFile(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}](input)
	if err != nil {
		return failure(err)
	}
	return s.readOne(in.Path, in.Offset, in.Limit)
}

func (s *session) readOne(p string, offset, limit int) toolOutput {
	full, rel, err := s.resolveRead(p)
	if err != nil {
		return s.pathErr(err)
	}
	fi, err := os.Stat(full)
	if err != nil || fi.IsDir() {
		if err == nil {
			return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "%q is a directory; use listFiles", rel))
		}
		return failure(s.missingErr(rel))
	}
	fields, content, err := describeFile(full, rel, offset, limit)
	if err != nil {
		return failure(agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "read %q", rel))
	}
	level := "L3"
	if rel == s.sk.File {
		level = "L2"
	}
	key := rel
	if offset > 0 || limit > 0 {
		key = fmt.Sprintf("%s@%d+%d", rel, offset, limit)
	}
	out, fresh := s.inject(key, level, content, fields)
	res := success(out)
	res.level, res.files, res.changed, res.cached = level, []string{rel}, fresh, !fresh
	return res
}

func (s *session) readRef(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Path string `json:"path"`
	}](input)
	if err != nil {
		return failure(err)
	}
	p := strings.TrimSpace(in.Path)
	if i := strings.IndexByte(p, '#'); i >= 0 {
		p = p[:i]
	}
	if strings.ContainsAny(p, "*?[{") {
		return s.readGlob(p)
	}
	// A reference as SKILL.md wrote it resolves like the loader resolved it
	// (case-insensitive or basename match).
	for _, r := range s.sk.References {
		if (r.Text == p || r.Path == p) && r.Exists {
			p = r.Path
		}
	}
	return s.readOne(p, 0, 0)
}

func (s *session) readGlob(pattern string) toolOutput {
	if !doublestar.ValidatePattern(pattern) || strings.HasPrefix(pattern, "/") || strings.Contains(pattern, "..") {
		return s.pathErr(agenterr.New(agenterr.CodePathEscape, agenterr.LayerSkill, true, "glob %q must be a relative pattern inside the skill", pattern))
	}
	matches, err := doublestar.Glob(os.DirFS(s.sk.Root), pattern, doublestar.WithFilesOnly(), doublestar.WithNoFollow())
	if err != nil {
		return failure(agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "glob %q", pattern))
	}
	sort.Strings(matches)
	if len(matches) == 0 {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "no file matches %q", pattern))
	}
	var docs []map[string]any
	var files []string
	fresh := false
	for i, m := range matches {
		if i == maxGlobFiles {
			break
		}
		full, rel, err := s.resolveRead(m)
		if err != nil {
			continue
		}
		fields, content, err := describeFile(full, rel, 0, 0)
		if err != nil {
			continue
		}
		out, f := s.inject(rel, "L3", content, fields)
		fresh = fresh || f
		docs = append(docs, out)
		files = append(files, rel)
	}
	res := success(map[string]any{"pattern": pattern, "matches": len(matches), "docs": docs, "truncated": len(matches) > maxGlobFiles})
	res.level, res.files, res.changed, res.cached = "L3", files, fresh, !fresh
	return res
}

func (s *session) listFiles(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Glob string `json:"glob"`
	}](input)
	if err != nil {
		return failure(err)
	}
	pattern := in.Glob
	if pattern == "" {
		pattern = "**"
	}
	if !doublestar.ValidatePattern(pattern) || strings.HasPrefix(pattern, "/") || strings.Contains(pattern, "..") {
		return s.pathErr(agenterr.New(agenterr.CodePathEscape, agenterr.LayerSkill, true, "glob %q must be a relative pattern inside the skill", pattern))
	}
	type entry struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
		Kind string `json:"kind"`
	}
	var list []entry
	total := 0
	walk := func(root, prefix string) {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || (prefix == "" && rel == "build")) {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") && prefix != "" {
				return nil
			}
			full := prefix + rel
			if ok, _ := doublestar.Match(pattern, full); !ok {
				return nil
			}
			total++
			if len(list) >= maxListFiles {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			kind := "text"
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				kind = "symlink"
			case scriptExts[strings.ToLower(path.Ext(rel))]:
				kind = "script"
			}
			list = append(list, entry{Path: full, Size: fi.Size(), Kind: kind})
			return nil
		})
	}
	walk(s.sk.Root, "")
	walk(s.build, "build/")
	return success(map[string]any{"files": list, "total": total, "truncated": total > len(list)})
}

// templateSteps bounds the work of one templateExpand call (nodes and
// loop items), so nested ranges stop long before the timeout.
const templateSteps = 1_000_000

// ExpandTemplate renders a Go text/template with JSON data, failing on
// missing keys, on output (or any string built on the way) larger than
// 1 MiB, on more than a million evaluation steps and when ctx ends. It runs
// in the caller's goroutine: when it returns, the expansion has stopped.
func ExpandTemplate(ctx context.Context, name, text string, data any) (string, error) {
	return gotmpl.Expand(ctx, name, text, jsonvalue.Normalize(data), gotmpl.Limits{MaxOutput: maxTemplateBytes, MaxSteps: templateSteps})
}

func (s *session) templateExpand(ctx context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Template string          `json:"template"`
		Data     json.RawMessage `json:"data"`
		Output   string          `json:"output"`
	}](input)
	if err != nil {
		return failure(err)
	}
	full, rel, err := s.resolveRead(in.Template)
	if err != nil {
		return s.pathErr(err)
	}
	src, err := readRegular(full)
	if err != nil {
		return failure(s.missingErr(rel))
	}
	var data any = s.in.Inputs
	if len(bytes.TrimSpace(in.Data)) > 0 && string(bytes.TrimSpace(in.Data)) != "null" {
		if err := json.Unmarshal(in.Data, &data); err != nil {
			return failure(agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "data is not JSON"))
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, err := ExpandTemplate(tctx, rel, string(src), data)
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "template %q", rel)
		switch {
		case errors.Is(err, gotmpl.ErrLimit):
			e.Hint = "the template produces too much: expand less (fewer nested ranges, no growing strings), at most 1 MiB"
		case tctx.Err() != nil:
			e.Hint = "the template took longer than 5 s: expand less"
		default:
			e.Hint = "pass data with every field the template uses"
		}
		return failure(e)
	}
	if in.Output == "" {
		res := success(map[string]any{"template": rel, "text": truncate(text, maxInjectChars), "bytes": len(text)})
		res.files = []string{rel}
		res.changed = true
		return res
	}
	res := s.write(in.Output, []byte(text))
	res.files = append([]string{rel}, res.files...)
	return res
}

// write stores an artifact under build/ (temp file + rename), versioned,
// within the disk budget.
func (s *session) write(relPath string, data []byte) toolOutput {
	full, err := s.resolveBuild(relPath)
	if err != nil {
		return s.pathErr(err)
	}
	rel, _ := filepath.Rel(s.build, full)
	rel = filepath.ToSlash(rel)
	if rel == "." || strings.HasPrefix(path.Base(rel), ".") {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "artifact name %q is not allowed", relPath))
	}
	limit := int64(s.budgets.DiskWriteLimitMB) << 20
	if s.diskWritten+int64(len(data)) > limit {
		e := agenterr.New(agenterr.CodeBudgetExceeded, agenterr.LayerSkill, true, "writing %d bytes would exceed disk_write_limit_mb (%d MB, %d bytes written)", len(data), s.budgets.DiskWriteLimitMB, s.diskWritten)
		e.Hint = "write less, or ask for a larger disk budget"
		return failure(e)
	}
	old, _ := readRegular(full)
	h := hashBytes(data)
	if prev := s.artifacts[rel]; prev != nil && prev.Hash == h {
		res := success(map[string]any{"handle": prev.Handle, "path": "build/" + rel, "unchanged": true, "note": "same content as " + prev.Handle})
		res.files = []string{"build/" + rel}
		return res
	}
	if err := writeFileAtomic(full, data); err != nil {
		return failure(agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "write build/%s", rel))
	}
	s.diskWritten += int64(len(data))
	a := s.register(rel, int64(len(data)), h)
	diff := lineDiffSummary(string(old), string(data))
	res := success(map[string]any{"handle": a.Handle, "path": "build/" + rel, "version": a.Version, "bytes": len(data), "hash": h, "diff": diff})
	res.files = []string{"build/" + rel}
	res.diff = a.Handle + ": " + diff
	res.changed = true
	return res
}

// register records a new version of an artifact.
func (s *session) register(rel string, size int64, h string) *Artifact {
	s.versions[rel]++
	name := strings.ReplaceAll(rel, "/", ".")
	a := &Artifact{Handle: fmt.Sprintf("act.%s@v%d", name, s.versions[rel]), Path: rel, Version: s.versions[rel], Bytes: size, Hash: h}
	s.artifacts[rel] = a
	return a
}

func (s *session) writeArtifact(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Path    string          `json:"path"`
		Content *string         `json:"content"`
		JSON    json.RawMessage `json:"json"`
	}](input)
	if err != nil {
		return failure(err)
	}
	var data []byte
	switch {
	case in.Content != nil && len(in.JSON) > 0:
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "give content or json, not both"))
	case in.Content != nil:
		data = []byte(*in.Content)
	case len(in.JSON) > 0:
		var v any
		if err := json.Unmarshal(in.JSON, &v); err != nil {
			return failure(agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "json is not valid"))
		}
		data, _ = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	default:
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "give content or json"))
	}
	return s.write(in.Path, data)
}

func (s *session) validateTool(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Schema json.RawMessage `json:"schema"`
		Rules  *Rules          `json:"rules"`
		Path   string          `json:"path"`
		Object json.RawMessage `json:"object"`
	}](input)
	if err != nil {
		return failure(err)
	}
	var data []byte
	name := "object.json"
	var files []string
	switch {
	case in.Path != "" && len(in.Object) > 0:
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "give path or object, not both"))
	case in.Path != "":
		full, rel, err := s.resolveRead(in.Path)
		if err != nil {
			// A bare name means a build/ output.
			return s.pathErr(err)
		}
		if _, statErr := os.Stat(full); statErr != nil && !strings.HasPrefix(rel, "build/") {
			if f2, err2 := s.resolveBuild(in.Path); err2 == nil {
				full, rel = f2, "build/"+strings.TrimPrefix(in.Path, "build/")
			}
		}
		data, err = readRegular(full)
		if err != nil {
			return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "%q does not exist", rel))
		}
		name = rel
		files = []string{rel}
	case len(in.Object) > 0:
		data = in.Object
	default:
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "give path or object to validate"))
	}
	var errs []string
	schemaRaw := bytes.TrimSpace(in.Schema)
	if len(schemaRaw) > 0 && string(schemaRaw) != "null" {
		var ref string
		if json.Unmarshal(schemaRaw, &ref) == nil {
			full, _, err := s.resolveRead(ref)
			if err != nil {
				return s.pathErr(err)
			}
			if _, err := os.Stat(full); err != nil {
				return failure(s.missingErr(ref))
			}
			errs = append(errs, validateAgainstSchema(s.rt.schemas, s.sk.Root, ref, name, data)...)
		} else {
			errs = append(errs, validateInline(s.rt.schemas, schemaRaw, name, data)...)
		}
	}
	if in.Rules != nil {
		errs = append(errs, checkRules(data, *in.Rules)...)
	}
	if len(schemaRaw) == 0 && in.Rules == nil {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "give a schema and/or rules"))
	}
	res := success(map[string]any{"valid": len(errs) == 0, "errors": errs})
	res.files = files
	key := "validate:" + name
	verdict := fmt.Sprint(len(errs) == 0, hashBytes(data))
	res.changed = s.blackboardSet(key, json.RawMessage(fmt.Sprintf("%q", verdict)))
	return res
}

func validateInline(schemas *jschema.Cache, schemaRaw []byte, name string, data []byte) []string {
	sch, err := schemas.Compile(jschema.Source{Raw: schemaRaw, URL: "mem:///inline.schema.json"})
	if err != nil {
		return []string{"schema: " + err.Error()}
	}
	v, err := decodeDoc(name, data)
	if err != nil {
		return []string{"compliance: not parseable: " + err.Error()}
	}
	return schemaErrors(sch, v)
}

func (s *session) runScript(ctx context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Path string          `json:"path"`
		Args json.RawMessage `json:"args"`
	}](input)
	if err != nil {
		return failure(err)
	}
	full, rel, err := s.resolveRead(in.Path)
	if err != nil {
		return s.pathErr(err)
	}
	src, err := readRegular(full)
	if err != nil {
		return failure(s.missingErr(rel))
	}
	if s.scriptFailures >= 2 {
		e := agenterr.New(agenterr.CodeSkillRepeatedFailure, agenterr.LayerSkill, true, "scripts failed twice; the one retry after a script failure is used up")
		e.Hint = "produce the output without scripts, or finalize and report"
		out := failure(e)
		out.refused = true
		return out
	}
	memoKey := hashBytes(append(append([]byte(rel+"\x00"), src...), canonicalJSON(in.Args)...))
	if m, ok := s.reusableScript(memoKey); ok {
		s.metrics.ScriptReuses++
		res := success(map[string]any{"script": rel, "status": "ok", "output": m.Output, "raw_output": m.RawOutput, "note": strings.TrimSpace(m.Note + " (reused: same script and arguments as an earlier run, which wrote nothing)")})
		res.files, res.cached, res.changed = []string{rel}, true, true
		return res
	}
	if s.rt.cfg.Sandbox == nil {
		e := agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false, "no sandbox is configured, scripts cannot run")
		e.Hint = "run on Linux with user namespaces and Landlock, or produce the output without scripts"
		return failure(e)
	}
	remainingMB := s.budgets.DiskWriteLimitMB - int(s.diskWritten>>20)
	if remainingMB < 1 {
		remainingMB = 1
	}
	sr, err := s.rt.cfg.Sandbox.RunScript(ctx, sandbox.ScriptSpec{
		Root: s.sk.Root, Build: s.build, Path: rel, Args: in.Args,
		Timeout: time.Duration(s.budgets.ScriptTimeoutS) * time.Second,
		Limits:  sandbox.Limits{CPUSeconds: s.budgets.ScriptTimeoutS, FileSizeMB: remainingMB},
		// Writes stop at the remaining budget while the script runs.
		WriteLimitMB: remainingMB,
	})
	if err != nil {
		if agenterr.CodeOf(err) == agenterr.CodePathEscape {
			return s.pathErr(err)
		}
		return failure(err)
	}
	s.metrics.ScriptRuns++
	s.diskWritten += max(0, sr.BuildBytes)
	changedFiles := s.syncBuild()
	fields := scriptFields(rel, &sr)
	fields["sandboxed"], fields["duration_ms"], fields["build_files_changed"] = sr.Sandboxed, sr.Duration.Milliseconds(), changedFiles
	if sr.Stderr != "" {
		fields["stderr_lines"] = sr.StderrLines
	}
	if s.diskWritten > int64(s.budgets.DiskWriteLimitMB)<<20 {
		s.violation = fmt.Sprintf("script %s pushed writes to %d bytes, over disk_write_limit_mb=%d", rel, s.diskWritten, s.budgets.DiskWriteLimitMB)
	}
	if sr.Status != sandbox.StatusOK {
		s.scriptFailures++
		s.lastScriptFailure = fmt.Sprintf("%s: %s", rel, sr.Reason)
		fields["retry"] = "one retry allowed after the first failure: change the parameters or use another script"
		if s.scriptFailures >= 2 {
			fields["retry"] = "no retries left"
		}
		e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "script %s: %s", rel, sr.Reason)
		out := failure(e)
		fields["ok"] = false
		b, _ := json.Marshal(fields)
		out.content = string(b)
		out.files = append([]string{rel}, changedFiles...)
		out.stderr = sr.Stderr
		return out
	}
	if sr.BuildBytes == 0 && len(changedFiles) == 0 {
		if s.scriptMemos == nil {
			s.scriptMemos = map[string]scriptMemo{}
		}
		s.scriptMemos[memoKey] = scriptMemo{Output: sr.Output, RawOutput: truncate(sr.RawOutput, maxRawOutput), Note: sr.Note}
	}
	res := success(fields)
	res.files = append([]string{rel}, changedFiles...)
	res.stderr = sr.Stderr
	res.changed = true
	if len(changedFiles) > 0 {
		res.diff = "script wrote " + strings.Join(changedFiles, ", ")
	}
	return res
}

// reusableScript finds a remembered side-effect-free result of the same
// script and arguments, from this run or an earlier run of the same skill.
func (s *session) reusableScript(key string) (scriptMemo, bool) {
	if m, ok := s.scriptMemos[key]; ok {
		return m, true
	}
	if s.in.Fresh || s.prior == nil || s.prior.SkillHash != s.skillHash() {
		return scriptMemo{}, false
	}
	m, ok := s.prior.Scripts[key]
	return m, ok
}

// syncBuild registers files a script created or changed under build/ as
// new artifact versions and returns their paths.
func (s *session) syncBuild() []string {
	var changed []string
	_ = filepath.WalkDir(s.build, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != s.build && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || !d.Type().IsRegular() {
			return nil
		}
		b, err := readRegular(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(s.build, p)
		rel = filepath.ToSlash(rel)
		h := hashBytes(b)
		if a := s.artifacts[rel]; a != nil && a.Hash == h {
			return nil
		}
		if a := s.artifacts[rel]; a == nil && s.baseline[rel] == fileStamp(p, b) {
			return nil // untouched since the run started
		}
		s.register(rel, int64(len(b)), h)
		changed = append(changed, "build/"+rel)
		return nil
	})
	return changed
}

func (s *session) summarize(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Path     string `json:"path"`
		Text     string `json:"text"`
		MaxLines int    `json:"max_lines"`
	}](input)
	if err != nil {
		return failure(err)
	}
	text := in.Text
	var files []string
	name := "text"
	if in.Path != "" {
		full, rel, err := s.resolveRead(in.Path)
		if err != nil {
			return s.pathErr(err)
		}
		b, err := readRegular(full)
		if err != nil {
			return failure(s.missingErr(rel))
		}
		if isBinary(b) {
			return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "%q is binary", rel))
		}
		text, files, name = string(b), []string{rel}, rel
	}
	if in.MaxLines <= 0 {
		in.MaxLines = 20
	}
	sum := Summarize(name, text, in.MaxLines)
	res := success(map[string]any{"summary": sum, "source_lines": strings.Count(text, "\n") + 1})
	res.files = files
	res.changed = s.blackboardSet("summary:"+name, json.RawMessage(fmt.Sprintf("%q", hashBytes([]byte(sum)))))
	return res
}

// Summarize is a deterministic extractive summary: for JSON the top-level
// keys and value kinds, otherwise headings and the first sentence of each
// paragraph, at most maxLines lines.
func Summarize(name, text string, maxLines int) string {
	var v map[string]any
	if json.Unmarshal([]byte(text), &v) == nil {
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lines []string
		for _, k := range keys {
			lines = append(lines, fmt.Sprintf("%s: %s", k, kindOf(v[k])))
			if len(lines) == maxLines {
				break
			}
		}
		return strings.Join(lines, "\n")
	}
	var out []string
	para := true
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			para = true
			continue
		case strings.HasPrefix(t, "#"):
			out = append(out, truncate(t, 160))
			para = true
			continue
		case para:
			sentence := t
			if i := strings.Index(t, ". "); i > 0 {
				sentence = t[:i+1]
			}
			out = append(out, "  "+truncate(sentence, 160))
			para = false
		}
		if len(out) >= maxLines {
			break
		}
	}
	return strings.Join(out, "\n")
}

func kindOf(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return fmt.Sprintf("object (%d keys)", len(x))
	case []any:
		return fmt.Sprintf("array (%d items)", len(x))
	case string:
		return "string " + truncate(fmt.Sprintf("%q", x), 60)
	case nil:
		return "null"
	default:
		return fmt.Sprint(x)
	}
}

func (s *session) diffTool(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		A string `json:"a"`
		B string `json:"b"`
	}](input)
	if err != nil {
		return failure(err)
	}
	var texts [2]string
	var files []string
	for i, p := range []string{in.A, in.B} {
		full, rel, err := s.resolveRead(p)
		if err != nil {
			return s.pathErr(err)
		}
		b, err := readRegular(full)
		if err != nil {
			return failure(s.missingErr(rel))
		}
		texts[i] = string(b)
		files = append(files, rel)
	}
	sum, hunks := LineDiff(texts[0], texts[1], 40)
	res := success(map[string]any{"summary": sum, "hunks": hunks, "identical": texts[0] == texts[1]})
	res.files = files
	res.diff = sum
	return res
}

func lineDiffSummary(a, b string) string {
	sum, _ := LineDiff(a, b, 0)
	return sum
}

// LineDiff compares two texts line by line (longest common subsequence,
// bounded to 2000 lines each) and returns a "+N -M lines" summary and up to
// maxLines changed lines prefixed with "+" or "-".
func LineDiff(a, b string, maxLines int) (string, []string) {
	al, bl := splitLines(a), splitLines(b)
	if len(al) > 2000 || len(bl) > 2000 {
		return fmt.Sprintf("%d → %d lines (too long for a line diff)", len(al), len(bl)), nil
	}
	n, m := len(al), len(bl)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	add, del := 0, 0
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			add++
			if len(out) < maxLines {
				out = append(out, "+"+truncate(bl[j], 200))
			}
			j++
		default:
			del++
			if len(out) < maxLines {
				out = append(out, "-"+truncate(al[i], 200))
			}
			i++
		}
	}
	return fmt.Sprintf("+%d -%d lines", add, del), out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// blackboardSet stores a value and reports whether it changed.
func (s *session) blackboardSet(key string, v json.RawMessage) bool {
	c := canonicalJSON(v)
	if prev, ok := s.blackboard[key]; ok && bytes.Equal(prev, c) {
		return false
	}
	s.blackboard[key] = c
	return true
}

func (s *session) bbPut(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}](input)
	if err != nil {
		return failure(err)
	}
	if in.Key == "" || len(in.Value) == 0 {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "key and value are required"))
	}
	if len(in.Value) > 64<<10 {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "value larger than 64 KiB; write an artifact instead"))
	}
	changed := s.blackboardSet("user:"+in.Key, in.Value)
	res := success(map[string]any{"key": in.Key, "changed": changed})
	res.changed = changed
	return res
}

func (s *session) bbGet(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Key string `json:"key"`
	}](input)
	if err != nil {
		return failure(err)
	}
	if in.Key == "" {
		keys := []string{}
		for k := range s.blackboard {
			if rest, ok := strings.CutPrefix(k, "user:"); ok {
				keys = append(keys, rest)
			}
		}
		sort.Strings(keys)
		return success(map[string]any{"keys": keys})
	}
	v, ok := s.blackboard["user:"+in.Key]
	if !ok {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "no blackboard key %q", in.Key))
	}
	return success(map[string]any{"key": in.Key, "value": v})
}

func (s *session) finalize(_ context.Context, _ json.RawMessage) toolOutput {
	val := s.validate()
	if val.OK {
		s.finalized = true
		return success(map[string]any{"validation": val})
	}
	var unmet []string
	for _, oc := range val.Outputs {
		if !oc.OK() {
			unmet = append(unmet, oc.Path+": "+strings.Join(oc.Errors, "; "))
		}
	}
	e := agenterr.New(agenterr.CodeSkillValidation, agenterr.LayerSkill, true, "not done: %s", strings.Join(unmet, " | "))
	e.Hint = "fix the listed outputs, then finalize again"
	out := failure(e)
	return out
}

// buildState is the AttemptMemo state of calls that depend on build/ and
// on the skill's files: the versions of every artifact.
func (s *session) buildState(json.RawMessage) string {
	var parts []string
	for _, a := range s.artifactList() {
		parts = append(parts, a.Path+"="+a.Hash)
	}
	return hashBytes([]byte(strings.Join(parts, ";")))
}

// scriptFields is what the model is told about a script run: its status,
// exit code, failure reason, parsed JSON output (or capped raw output), the
// runner's note and capped stderr.
func scriptFields(script string, sr *sandbox.ScriptResult) map[string]any {
	fields := map[string]any{"script": script, "status": sr.Status, "exit_code": sr.ExitCode}
	if sr.Reason != "" {
		fields["reason"] = sr.Reason
	}
	if sr.Output != nil {
		fields["output"] = sr.Output
	}
	if sr.RawOutput != "" {
		fields["raw_output"] = truncate(sr.RawOutput, maxRawOutput)
	}
	if sr.Note != "" {
		fields["note"] = sr.Note
	}
	if sr.Stderr != "" {
		fields["stderr"] = truncate(sr.Stderr, 2000)
	}
	return fields
}
