package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

type lookupInput struct {
	City  string   `json:"city" jsonschema:"the city to look up"`
	Days  int      `json:"days,omitempty" jsonschema:"forecast days, 1 to 7"`
	Units *string  `json:"units,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

// lookupTool records what its function received.
func lookupTool(calls *[]lookupInput) *tool.FuncTool[lookupInput] {
	return tool.Func("Lookup", "Look up the weather.", func(_ context.Context, in lookupInput) (string, error) {
		*calls = append(*calls, in)
		if in.City == "Atlantis" {
			return "", errors.New("no such city")
		}
		return "sunny in " + in.City, nil
	})
}

func TestFuncSchemaInferred(t *testing.T) {
	var calls []lookupInput
	lt := lookupTool(&calls)
	var s struct {
		Type                 string                     `json:"type"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(lt.Spec().InputSchema, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || len(s.Required) != 1 || s.Required[0] != "city" || s.AdditionalProperties == nil || *s.AdditionalProperties ||
		!strings.Contains(string(s.Properties["city"]), "the city to look up") || len(s.Properties) != 4 {
		t.Fatalf("schema %s", lt.Spec().InputSchema)
	}
	if lt.Spec().Name != "Lookup" || lt.Spec().Description != "Look up the weather." || lt.Kind() != tool.KindExecute {
		t.Fatalf("spec %+v kind %s", lt.Spec(), lt.Kind())
	}
	if r := lt.WithKind(tool.KindRead); r.Kind() != tool.KindRead || lt.Kind() != tool.KindExecute {
		t.Fatal("WithKind changed the original or did not apply")
	}
}

// Hostile and malformed inputs never reach the function: each is a
// TOOL_INPUT error result the model can read, naming what is wrong.
func TestFuncRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"not JSON", `{"city": `, "not valid JSON"},
		{"trailing data", `{"city":"Oslo"} {"city":"Rome"}`, "not valid JSON"},
		{"array", `["Oslo"]`, "at (root)"},
		{"null", `null`, "at (root)"},
		{"string", `"Oslo"`, "at (root)"},
		{"missing required", `{"days":2}`, "city"},
		{"wrong type", `{"city":42}`, "at /city"},
		{"unknown field", `{"city":"Oslo","cmd":"rm -rf /"}`, "cmd"},
		{"other case", `{"CITY":"Oslo"}`, "CITY"},
		{"duplicate key with other case", `{"city":"Oslo","City":"Rome"}`, "City"},
		{"number too large for int", `{"city":"Oslo","days":1e30}`, "days"},
		{"fraction for int", `{"city":"Oslo","days":1.5}`, "at /days"},
		{"nested wrong type", `{"city":"Oslo","tags":[1]}`, "at /tags/0"},
		{"deep nesting", `{"city":"Oslo","tags":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "TOOL_INPUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []lookupInput
			res, err := lookupTool(&calls).Run(context.Background(), json.RawMessage(tc.input))
			if err != nil || !res.IsError || len(calls) != 0 {
				t.Fatalf("err %v, result %+v, fn called %d times", err, res, len(calls))
			}
			if !strings.HasPrefix(res.Content, agenterr.CodeToolInput+": Lookup: ") || !strings.Contains(res.Content, tc.want) ||
				!strings.Contains(res.Content, "hint: send a JSON object matching the input schema") {
				t.Fatalf("content %q, want it to mention %q", res.Content, tc.want)
			}
		})
	}
}

func TestFuncCallsFunction(t *testing.T) {
	var calls []lookupInput
	lt := lookupTool(&calls)
	res, err := lt.Run(context.Background(), json.RawMessage(`{"city":"Oslo","units":null,"tags":["a"]}`))
	if err != nil || res.IsError || res.Content != "sunny in Oslo" || len(calls) != 1 || calls[0].City != "Oslo" || calls[0].Tags[0] != "a" {
		t.Fatalf("err %v result %+v calls %+v", err, res, calls)
	}
	// The function's error is the model's error result.
	res, err = lt.Run(context.Background(), json.RawMessage(`{"city":"Atlantis"}`))
	if err != nil || !res.IsError || res.Content != "no such city" {
		t.Fatalf("err %v result %+v", err, res)
	}
	// No input at all is an empty object, which lacks the required city.
	if res, _ := lt.Run(context.Background(), nil); !res.IsError || !strings.Contains(res.Content, "city") {
		t.Fatalf("empty input: %+v", res)
	}
}

func TestFuncRejectsNonObjectTypes(t *testing.T) {
	for name, build := range map[string]func(){
		"string input": func() {
			tool.Func("s", "", func(context.Context, string) (string, error) { return "", nil })
		},
		"channel field": func() {
			tool.Func("c", "", func(context.Context, struct{ C chan int }) (string, error) { return "", nil })
		},
		"no name": func() {
			tool.Func("", "", func(context.Context, lookupInput) (string, error) { return "", nil })
		},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(panicText(r), "tool.Func") {
					t.Errorf("%s: panic %v", name, r)
				}
			}()
			build()
		}()
	}
}

func panicText(v any) string {
	s, _ := v.(string)
	return s
}

// FuzzFuncInput: whatever the model sends, the tool answers without
// failing, and the function only sees input that matches its type.
func FuzzFuncInput(f *testing.F) {
	for _, s := range []string{`{"city":"Oslo"}`, `{"city":"Oslo","days":3,"units":"metric","tags":["x"]}`,
		`{"city":1}`, `{}`, `[]`, `{"CITY":"x"}`, `{"city":"a","days":1e400}`, "{\"city\":\"\xff\"}", `{"city":"a","units":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		var calls []lookupInput
		res, err := lookupTool(&calls).Run(context.Background(), json.RawMessage(input))
		if err != nil {
			t.Fatalf("error %v", err)
		}
		if len(calls) > 1 || (len(calls) == 1) == (res.IsError && res.Content != "no such city") {
			t.Fatalf("input %q: %d calls, result %+v", input, len(calls), res)
		}
		if res.IsError && len(calls) == 0 && !strings.HasPrefix(res.Content, agenterr.CodeToolInput) {
			t.Fatalf("input %q: refusal without a code: %q", input, res.Content)
		}
	})
}

// A Func tool is an execute tool unless declared otherwise, so the default
// permission mode refuses it until allowedTools names it.
func TestFuncKindUnderPolicy(t *testing.T) {
	var calls []lookupInput
	lt := lookupTool(&calls)
	in := json.RawMessage(`{"city":"Oslo"}`)
	if d := (tool.Policy{}).Decide(lt, in); d.Allowed {
		t.Fatal("an execute tool ran in the default mode without being named")
	}
	if d := (tool.Policy{Allowed: []string{"Lookup"}}).Decide(lt, in); !d.Allowed {
		t.Fatalf("named tool denied: %s", d.Reason)
	}
	if d := (tool.Policy{}).Decide(lt.WithKind(tool.KindRead), in); !d.Allowed {
		t.Fatalf("read tool denied: %s", d.Reason)
	}
}
