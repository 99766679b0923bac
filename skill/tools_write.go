package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
	jschema "github.com/capstan-dev/capstan/schema"
)

// ExpandTemplate renders a Go text/template with JSON data, failing on
// missing keys, on output (or any string built on the way) larger than
// 1 MiB, on more than a million evaluation steps and when ctx ends. It runs
// in the caller's goroutine: when it returns, the expansion has stopped.
func ExpandTemplate(ctx context.Context, name, text string, data any) (string, error) {
	return expandTemplate(ctx, name, text, jsonvalue.Normalize(data), templateLimits{MaxOutput: maxTemplateBytes, MaxSteps: templateSteps})
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
		case errors.Is(err, errTemplateLimit):
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
