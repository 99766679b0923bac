package mdfence

import (
	"reflect"
	"strings"
	"testing"
)

func TestBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []Block
	}{
		{"tagged", "Finished.\n```done\n{\"a\": 1}\n```\nafter", []Block{{"```", "done", "{\"a\": 1}\n", true}}},
		{"untagged", "Result:\n```\n{\"c\": 3}\n```", []Block{{"```", "", "{\"c\": 3}\n", true}}},
		{"unclosed runs to the end", "```json\n{\"f\": 6}\n", []Block{{"```", "json", "{\"f\": 6}\n", false}}},
		{"two blocks", "```a\n1\n```\nthen\n```b\n2\n```", []Block{{"```", "a", "1\n", true}, {"```", "b", "2\n", true}}},
		{"tilde fence", "~~~json\n{\"d\": 4}\n~~~", []Block{{"~~~", "json", "{\"d\": 4}\n", true}}},
		{"indented, case kept", "  ```JSON\n  {\"e\": 5}\n  ```", []Block{{"```", "JSON", "  {\"e\": 5}\n", true}}},
		{"info trimmed", "```  facilitator_decision \r\nx\r\n```\r\n", []Block{{"```", "facilitator_decision", "x\r\n", true}}},
		{"info with attributes", "```json title=a\n{}\n```", []Block{{"```", "json title=a", "{}\n", true}}},
		{"empty body", "```json\n```", []Block{{"```", "json", "", true}}},
		{"whitespace body", "```json\n\n```", []Block{{"```", "json", "\n", true}}},
		{"inline code is no fence", "```json`\n{}\n```", []Block{{"```", "", "", false}}},
		{"one-line inline code", "say ```x``` here\n", nil},
		{"longer fence holds a shorter one", "````md\n```json\n{}\n```\n````\n", []Block{{"````", "md", "```json\n{}\n```\n", true}}},
		{"closing fence may be longer", "```\nx\n`````\n", []Block{{"```", "", "x\n", true}}},
		{"a fence with an info string does not close", "```a\n{}\n```json\n```", []Block{{"```", "a", "{}\n```json\n", true}}},
		{"other character does not close", "~~~\nx\n```\n~~~", []Block{{"~~~", "", "x\n```\n", true}}},
		{"two backticks are no fence", "``json\n{}\n``", nil},
		{"no blocks", "plain prose", nil},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Blocks(tc.text); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Blocks(%q)\n got %+v\nwant %+v", tc.text, got, tc.want)
			}
		})
	}
}

func FuzzBlocks(f *testing.F) {
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
		for _, b := range Blocks(text) {
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
		want := []Block{{Fence: "```", Info: info, Body: body, Closed: true}}
		if got := Blocks(text); !reflect.DeepEqual(got, want) {
			t.Fatalf("Blocks(%q)\n got %+v\nwant %+v", text, got, want)
		}
	})
}
