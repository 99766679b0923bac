package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/textdiff"
)

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
	sum, hunks := textdiff.Lines(texts[0], texts[1], 40)
	res := success(map[string]any{"summary": sum, "hunks": hunks, "identical": texts[0] == texts[1]})
	res.files = files
	res.diff = sum
	return res
}

func lineDiffSummary(a, b string) string {
	sum, _ := textdiff.Lines(a, b, 0)
	return sum
}
