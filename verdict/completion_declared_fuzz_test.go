package verdict

import (
	"strings"
	"testing"
)

func FuzzDetectDeclaration(f *testing.F) {
	f.Add(`{"status":"completed"}`, "TASK_COMPLETE", "TASK_COMPLETE")
	f.Add(`{"next_action":{"action":"complete","reason":"x"}}`, "", "")
	f.Add(`{"a":{"b":[1,{"c":null}]}}`, "x", "")
	f.Fuzz(func(t *testing.T, so, text, kw string) {
		d := DetectDeclaration([]byte(so), []string{text}, kw, DeclarationFields{Status: "a.b", NextAction: "next_action"})
		if d.Declared && d.Source == "" {
			t.Fatal("declared without a source")
		}
		if d.Source == "keyword" && (kw == "" || !strings.Contains(text, kw)) {
			t.Fatalf("keyword declaration without the keyword: %q in %q", kw, text)
		}
	})
}
