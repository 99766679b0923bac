package skill

import (
	"bytes"
	"context"
	"encoding/json"
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
)

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
