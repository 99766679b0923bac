package schema

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

func TestValidateProblems(t *testing.T) {
	v, err := Compile(json.RawMessage(`{
	  "type": "object",
	  "properties": {
	    "status": {"enum": ["completed", "in_progress"]},
	    "count": {"type": "integer", "minimum": 0},
	    "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}}
	  },
	  "required": ["status", "count"],
	  "additionalProperties": false
	}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []any{
		json.RawMessage(`{"status": "completed", "count": 2}`),
		[]byte(`{"status": "in_progress", "count": 0, "items": [{"name": "a"}]}`),
		map[string]any{"status": "completed", "count": 1},
		map[string]any{"status": "completed", "count": json.Number("4"), "items": []any{map[string]any{"name": "x"}}},
		map[string]any{"status": "completed", "count": float64(2)},
		struct {
			Status string `json:"status"`
			Count  int    `json:"count"`
		}{"completed", 3},
	} {
		if err := v.Validate(ok); err != nil {
			t.Errorf("%v rejected: %v", ok, err)
		}
	}

	err = v.Validate(json.RawMessage(`{"status": "done", "count": -1, "items": [{"name": "a"}, {"nam": "b"}], "extra": true}`))
	if err == nil {
		t.Fatal("invalid value accepted")
	}
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSchemaValidation || !e.Recoverable || e.Layer != agenterr.LayerCompletion {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, agenterr.ErrSchemaValidation) {
		t.Fatal("errors.Is ErrSchemaValidation")
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatal("no *ValidationError in the chain")
	}
	problems := ve.Problems()
	joined := strings.Join(problems, "\n")
	for _, want := range []string{"at /status:", "at /count:", "at /items/1:", "at (root):"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	if !strings.Contains(joined, "extra") || !strings.Contains(joined, "name") {
		t.Errorf("problems should name the offending properties:\n%s", joined)
	}
	for _, p := range problems {
		if !strings.HasPrefix(p, "at ") {
			t.Errorf("problem %q lacks its location", p)
		}
	}
	if !strings.Contains(err.Error(), "at /status:") {
		t.Errorf("message does not list problems: %v", err)
	}
	// Problems returns a copy.
	problems[0] = "changed"
	if ve.Problems()[0] == "changed" {
		t.Fatal("Problems exposes internal state")
	}
	if Problems(errors.New("other")) != nil {
		t.Fatal("Problems of a foreign error")
	}
}

func TestValidateNotJSON(t *testing.T) {
	v, err := Compile(json.RawMessage(`{"type": "object"}`))
	if err != nil {
		t.Fatal(err)
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for _, bad := range []any{json.RawMessage(`{"a":`), []byte("not json"), make(chan int), math.NaN(), map[string]any{"x": math.Inf(1)}, cyclic} {
		err := v.Validate(bad)
		if agenterr.CodeOf(err) != agenterr.CodeSchemaValidation || len(Problems(err)) != 1 {
			t.Errorf("%v: %v %q", bad, err, Problems(err))
		}
	}
	if err := v.Validate(json.RawMessage(`"a string"`)); len(Problems(err)) == 0 {
		t.Fatalf("a string passed an object schema: %v", err)
	}
}

func TestValidateManyProblemsAreTruncatedInMessage(t *testing.T) {
	v, err := Compile(json.RawMessage(`{"type": "array", "items": {"type": "string"}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = v.Validate(json.RawMessage(`[1,2,3,4,5,6,7,8,9,10,11,12]`))
	if n := len(Problems(err)); n != 12 {
		t.Fatalf("want 12 problems, got %d", n)
	}
	if !strings.Contains(err.Error(), "and 4 more") {
		t.Fatalf("message %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, raw := range []string{
		`{`,
		`{"type": 5}`,
		`{"minimum": "x"}`,
		`{"$ref": "file:///etc/passwd"}`,
		`{"$ref": "https://example.com/schema.json"}`,
		`{"$ref": "other.json"}`,
		`{"pattern": "("}`,
	} {
		_, err := Compile(json.RawMessage(raw))
		if agenterr.CodeOf(err) != agenterr.CodeSchemaResolution {
			t.Errorf("%s: got %v", raw, err)
		}
	}
	// The hint fits the problem: the Resolver only for a reference to
	// another document.
	for raw, want := range map[string]string{
		`{"type": "strin"}`:      "fix each listed problem",
		`{"$ref": "other.json"}`: "schema.Resolver",
		`{"minLength": -1}`:      "fix each listed problem",
	} {
		_, err := Compile(json.RawMessage(raw))
		var e *agenterr.Error
		if !errors.As(err, &e) || !strings.Contains(e.Hint, want) {
			t.Errorf("%s: got %v, want a hint with %q", raw, err, want)
		}
	}
	// Draft-07 schemas declaring their draft compile too.
	if _, err := Compile(json.RawMessage(`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"type": "string"}}, "$ref": "#/definitions/a"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestExtractJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{"whole object", `  {"a": 1}  `, `{"a": 1}`, true},
		{"whole array", "[1, 2]\n", `[1, 2]`, true},
		{"fenced json", "Here you go:\n```json\n{\"status\": \"completed\"}\n```\nDone.", `{"status": "completed"}`, true},
		{"fenced json after other fence", "```\nnot json\n```\n```json\n{\"b\": 2}\n```", `{"b": 2}`, true},
		{"json tag preferred", "```\n{\"plain\": 1}\n```\n```json\n{\"tagged\": 1}\n```", `{"tagged": 1}`, true},
		{"untagged fence", "Result:\n```\n{\"c\": 3}\n```", `{"c": 3}`, true},
		{"tilde fence", "~~~json\n{\"d\": 4}\n~~~", `{"d": 4}`, true},
		{"indented fence", "  ```JSON\n  {\"e\": 5}\n  ```", `{"e": 5}`, true},
		{"unclosed fence", "```json\n{\"f\": 6}\n", `{"f": 6}`, true},
		{"invalid fenced then prose object", "```json\n{broken\n```\nActually: {\"g\": 7}", `{"g": 7}`, true},
		{"prose object", `I think the answer is {"status": "done", "n": {"x": 1}} as requested.`, `{"status": "done", "n": {"x": 1}}`, true},
		{"braces in strings", `Output: {"msg": "use } and { freely", "q": "\"}"} end`, `{"msg": "use } and { freely", "q": "\"}"}`, true},
		{"first parseable object", `{not json} then {"h": 8}`, `{"h": 8}`, true},
		{"object inside broken one", `{"outer": oops {"inner": 1} }`, `{"inner": 1}`, true},
		{"no json", "I could not finish the task.", "", false},
		{"empty", "", "", false},
		{"unbalanced", `{"a": 1`, "", false},
		{"only whitespace fence", "```json\n\n```", "", false},
		{"scalar whole text", "42", "42", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ExtractJSON(tc.in)
			if ok != tc.ok || string(got) != tc.want {
				t.Fatalf("got %q %v, want %q %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// JSONCandidates lists what ExtractJSON considers, most likely first,
// without repeats, so a caller can take the first that passes its own test.
func TestJSONCandidates(t *testing.T) {
	text := "Plan:\n```\n[1, 2]\n```\n```json\n{\"a\": 1}\n```\nSo the answer is {\"a\": 1} or {\"b\": {\"c\": 2}}."
	var got []string
	for _, c := range JSONCandidates(text) {
		got = append(got, string(c))
	}
	want := []string{`{"a": 1}`, `[1, 2]`, `{"b": {"c": 2}}`, `{"c": 2}`}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if JSONCandidates("no json here") != nil {
		t.Fatal("candidates in plain prose")
	}
}

func TestExtractJSONAdversarialIsBounded(t *testing.T) {
	// Many unmatched braces: bounded work, no match.
	in := strings.Repeat("{", 200_000)
	if _, ok := ExtractJSON(in); ok {
		t.Fatal("matched unbalanced braces")
	}
	in = strings.Repeat(`{"a": `, 10_000) + "1" + strings.Repeat("}", 10_000)
	if _, ok := ExtractJSON("prefix " + in); !ok {
		t.Fatal("deeply nested object not recovered")
	}
}

// A compiled schema never reads the documents its references point at:
// Compile is given schemas that name files, and must not open them.
func TestCompileReadsNoReferencedFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "secret.schema.json")
	if err := os.WriteFile(target, []byte(`{"type":"string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := `{"type":"object","properties":{"a":{"$ref":"file://` + filepath.ToSlash(target) + `"}}}`
	_, err := Compile(json.RawMessage(raw))
	if agenterr.CodeOf(err) != agenterr.CodeSchemaResolution || !strings.Contains(err.Error(), "not loaded") {
		t.Fatalf("err %v", err)
	}
	// A caller that names a loader gets its references resolved by it.
	read := func(u string) ([]byte, error) { return os.ReadFile(strings.TrimPrefix(u, "file://")) }
	sch, err := CompileSource(Source{Raw: []byte(raw), Loader: read})
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Check(map[string]any{"a": 1.0}); err == nil {
		t.Fatal("the referenced schema was not applied")
	}
}

func TestCompileSourceErrors(t *testing.T) {
	for raw, stage := range map[string]string{`{"type":`: "json", `{"type":"nope"}`: "compile", `{"$ref":"other.json"}`: "compile"} {
		_, err := CompileSource(Source{Raw: []byte(raw), URL: "mem:///x.json"})
		var se *SourceError
		if !errors.As(err, &se) || se.Stage != stage || !strings.Contains(err.Error(), "mem:///x.json") {
			t.Errorf("%s: %v, want stage %s", raw, err, stage)
		}
	}
}

func TestEnumAt(t *testing.T) {
	s := json.RawMessage(`{"type":"object","properties":{"next_action":{"properties":{"action":{"enum":["next","repeat",3]}}}},
		"allOf":[{"properties":{"verdict":{"const":"ok"}}}],"a/b":{"enum":["x"]}}`)
	for _, tc := range []struct {
		ptr  string
		want string
		ok   bool
	}{
		{"#/properties/next_action/properties/action", "next,repeat", true},
		{"#/properties/verdict", "ok", true},
		{"#/a~1b", "x", true},
		{"#/properties/next_action", "", false},
		{"#/properties/ghost", "", false},
		{"properties", "", false},
	} {
		got, ok := EnumAt(s, tc.ptr)
		if ok != tc.ok || strings.Join(got, ",") != tc.want {
			t.Errorf("%s: %v %v, want %q %v", tc.ptr, got, ok, tc.want, tc.ok)
		}
	}
}
