package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
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
