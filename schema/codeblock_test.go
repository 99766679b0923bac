package schema

import (
	"reflect"
	"strings"
	"testing"
)

func TestCodeBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []CodeBlock
	}{
		{"tagged", "Finished.\n```done\n{\"a\": 1}\n```\nafter", []CodeBlock{{"```", "done", "{\"a\": 1}\n", true}}},
		{"untagged", "Result:\n```\n{\"c\": 3}\n```", []CodeBlock{{"```", "", "{\"c\": 3}\n", true}}},
		{"unclosed runs to the end", "```json\n{\"f\": 6}\n", []CodeBlock{{"```", "json", "{\"f\": 6}\n", false}}},
		{"two blocks", "```a\n1\n```\nthen\n```b\n2\n```", []CodeBlock{{"```", "a", "1\n", true}, {"```", "b", "2\n", true}}},
		{"tilde fence", "~~~json\n{\"d\": 4}\n~~~", []CodeBlock{{"~~~", "json", "{\"d\": 4}\n", true}}},
		{"indented, case kept", "  ```JSON\n  {\"e\": 5}\n  ```", []CodeBlock{{"```", "JSON", "  {\"e\": 5}\n", true}}},
		{"info trimmed", "```  facilitator_decision \r\nx\r\n```\r\n", []CodeBlock{{"```", "facilitator_decision", "x\r\n", true}}},
		{"info with attributes", "```json title=a\n{}\n```", []CodeBlock{{"```", "json title=a", "{}\n", true}}},
		{"empty body", "```json\n```", []CodeBlock{{"```", "json", "", true}}},
		{"whitespace body", "```json\n\n```", []CodeBlock{{"```", "json", "\n", true}}},
		{"inline code is no fence", "```json`\n{}\n```", []CodeBlock{{"```", "", "", false}}},
		{"one-line inline code", "say ```x``` here\n", nil},
		{"longer fence holds a shorter one", "````md\n```json\n{}\n```\n````\n", []CodeBlock{{"````", "md", "```json\n{}\n```\n", true}}},
		{"closing fence may be longer", "```\nx\n`````\n", []CodeBlock{{"```", "", "x\n", true}}},
		{"a fence with an info string does not close", "```a\n{}\n```json\n```", []CodeBlock{{"```", "a", "{}\n```json\n", true}}},
		{"other character does not close", "~~~\nx\n```\n~~~", []CodeBlock{{"~~~", "", "x\n```\n", true}}},
		{"two backticks are no fence", "``json\n{}\n``", nil},
		{"no blocks", "plain prose", nil},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CodeBlocks(tc.text); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("CodeBlocks(%q)\n got %+v\nwant %+v", tc.text, got, tc.want)
			}
		})
	}
}

func FuzzCodeBlocks(f *testing.F) {
	for _, s := range []string{
		"```json\n{\"b\": 1}\n```",
		"~~~\n[1,2]\n~~~",
		"  ```JSON\n  {}\n  ```",
		"```json`\n{}\n```",
		"````\n```\n````",
		"```a\n1\n```\n```b\n2",
		"",
	} {
		f.Add(s, "done", "{\"x\": 1}")
	}
	f.Fuzz(func(t *testing.T, text, info, body string) {
		for _, b := range CodeBlocks(text) {
			if len(b.Fence) < 3 || strings.Trim(b.Fence, b.Fence[:1]) != "" || (b.Fence[0] != '`' && b.Fence[0] != '~') {
				t.Fatalf("fence %q is not three or more ` or ~", b.Fence)
			}
			if strings.ContainsAny(b.Info, "\n") || strings.TrimSpace(b.Info) != b.Info {
				t.Fatalf("info %q is not one trimmed line", b.Info)
			}
			if !strings.Contains(text, b.Body) {
				t.Fatalf("body %q is not part of the text", b.Body)
			}
		}
		// A block written around body is found again whole, unless the
		// info or the body could be read as fences themselves.
		info = strings.TrimSpace(info)
		if strings.ContainsAny(info, "`\n\r") || strings.Contains(body, "```") {
			return
		}
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		text = "prose\n```" + info + "\n" + body + "```\n"
		want := []CodeBlock{{Fence: "```", Info: info, Body: body, Closed: true}}
		if got := CodeBlocks(text); !reflect.DeepEqual(got, want) {
			t.Fatalf("CodeBlocks(%q)\n got %+v\nwant %+v", text, got, want)
		}
	})
}
