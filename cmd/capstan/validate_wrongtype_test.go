package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
)

// A number where agent.json or the steps registry wants a string is one
// mistake, and validate says it once: one error, the schema's type error,
// at the line:column of the value, naming the type wanted. Every string
// value of the example agents, of capstan init's agent with labels, a
// sandbox network and a step model added, and of a climpt-format agent
// with intent transitions is replaced by a number in turn. (The checks
// that follow from the value, a step without c2, a retry prompt that no
// longer resolves, an enum the number is not in, used to report it again;
// a transition's target of the wrong type lost the rest of the registry.)
func TestValidateWrongTypeIsOneError(t *testing.T) {
	rich := scaffold(t)
	edit := func(file string, change func(map[string]any)) {
		p := filepath.Join(rich, file)
		var doc map[string]any
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &doc)
		}
		if err != nil {
			t.Fatal(err)
		}
		change(doc)
		writeIndented(t, p, doc)
	}
	edit(agentdir.AgentFile, func(d map[string]any) {
		r := d["runner"].(map[string]any)
		r["boundaries"].(map[string]any)["sandbox"] = map[string]any{"network": map[string]any{"allow": []any{"example.com:443"}}}
		r["integrations"] = map[string]any{"github": map[string]any{"enabled": true, "defaultClosureAction": "close",
			"labels": map[string]any{"completion": map[string]any{"add": []any{"done"}, "remove": []any{"wip"}}, "blocked": "blocked"}}}
		d["parameters"].(map[string]any)["issue"] = map[string]any{"type": "number", "description": "the issue", "required": true, "cli": "--issue"}
	})
	edit(agentdir.DefaultRegistryFile, func(d map[string]any) {
		for _, st := range d["steps"].(map[string]any) {
			st.(map[string]any)["model"] = "script:script.yaml"
		}
	})
	folders := []string{rich, copyDir(t, filepath.Join("..", "..", "agent", "testdata", "climpt-typecheck"))}
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*", agentdir.AgentFile))
	for _, a := range examples {
		folders = append(folders, copyDir(t, filepath.Dir(a)))
	}
	const marker = 7777777
	tried := 0
	for _, dir := range folders {
		if res, _, _ := validateAgentDir(dir); !res.Valid() {
			t.Fatalf("%s is not valid to begin with: %v", dir, res.Errors())
		}
		for _, file := range []string{agentdir.AgentFile, agentdir.DefaultRegistryFile} {
			p := filepath.Join(dir, file)
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal(orig, &doc); err != nil {
				t.Fatal(err)
			}
			for _, ptr := range stringPointers(doc, "") {
				if ptr == "/$schema" {
					continue
				}
				var mutated any
				_ = json.Unmarshal(orig, &mutated)
				setPointer(mutated, ptr, marker)
				text := writeIndented(t, p, mutated)
				off := strings.Index(text, strconv.Itoa(marker))
				line := strings.Count(text[:off], "\n") + 1
				col := off - strings.LastIndex(text[:off], "\n")
				res, _, _ := validateAgentDir(dir)
				errs := res.Errors()
				tried++
				// A parameter's default is checked against the parameter's
				// own type, not the schema's.
				wantCode := map[string]string{agentdir.AgentFile: "AC-SCHEMA-TYPE", agentdir.DefaultRegistryFile: "SR-SCHEMA-TYPE"}[file]
				if strings.HasPrefix(ptr, "/parameters/") && strings.HasSuffix(ptr, "/default") {
					wantCode = "PA-DEFAULT-TYPE"
				}
				if len(errs) != 1 || errs[0].Code != wantCode || errs[0].File != file || errs[0].Pointer != ptr ||
					errs[0].Line != line || errs[0].Column != col || !strings.Contains(errs[0].Message, "string") {
					t.Errorf("%s %s%s = %d (at %d:%d): want one %s there saying a string is wanted, got %d:\n%v",
						filepath.Base(dir), file, ptr, marker, line, col, wantCode, len(errs), errs)
				}
			}
			if err := os.WriteFile(p, orig, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(folders) < 5 || tried < 100 {
		t.Fatalf("%d values in %d folders tried: the examples were not found", tried, len(folders))
	}
}

// writeIndented writes v indented to p and returns the text.
func writeIndented(t *testing.T, p string, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stringPointers lists the JSON Pointers of v's string values.
func stringPointers(v any, ptr string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out = append(out, stringPointers(e, ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))...)
		}
	case []any:
		for i, e := range x {
			out = append(out, stringPointers(e, ptr+"/"+strconv.Itoa(i))...)
		}
	case string:
		out = append(out, ptr)
	}
	return out
}

// setPointer sets the value at ptr (a pointer stringPointers returned).
func setPointer(v any, ptr string, val any) {
	parts := strings.Split(ptr, "/")[1:]
	for i, p := range parts {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		last := i == len(parts)-1
		switch x := v.(type) {
		case map[string]any:
			if last {
				x[p] = val
				return
			}
			v = x[p]
		case []any:
			n, _ := strconv.Atoi(p)
			if last {
				x[n] = val
				return
			}
			v = x[n]
		}
	}
}
