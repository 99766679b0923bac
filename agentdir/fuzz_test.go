package agentdir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func seedBytes(f *testing.F) {
	a, _ := json.MarshalIndent(baseAgent(), "", "  ")
	r, _ := json.MarshalIndent(baseRegistry(), "", "  ")
	f.Add(a, r)
	f.Add([]byte(`{}`), []byte(`{}`))
	f.Add([]byte(`[]`), []byte(`null`))
	f.Add([]byte(`{"runner":{"prompts":{"registry":"../../etc/passwd"}}}`), []byte(`{}`))
	f.Add([]byte(`{"parameters":{"a":{"type":"number","default":"x","validation":{"pattern":"(["}}}}`), []byte(`{"steps":{"a":{"subSteps":["a"]}}}`))
	f.Add([]byte(`{"runner":{"completion":{"type":"composite","conditions":[{"type":"composite","conditions":[{}]}]}}}`), []byte(`{"entryStep":1}`))
	f.Add([]byte("{\"a\":\"\\ud800\",\"a\":1,\"\\u0061\":2}"), []byte(`{"steps":{"x~/y":{"check":{"onPass":{"next":"x~/y"}}}}}`))
	f.Add([]byte(`{"name":`), []byte(``))
}

// checkProblems asserts what every validation result must satisfy.
func checkProblems(t *testing.T, r ValidationResult) {
	t.Helper()
	if r.Valid() != (len(r.Errors()) == 0) {
		t.Fatal("invariant valid == (len(errors) == 0) broken")
	}
	for _, p := range r.Problems() {
		if p.Code == "" || p.File == "" || p.Message == "" {
			t.Fatalf("problem without code, file or message: %+v", p)
		}
		if !IsKnownCode(p.Code) {
			t.Fatalf("undocumented code %q: %s", p.Code, p)
		}
		if p.Severity != SeverityError && p.Severity != SeverityWarning {
			t.Fatalf("bad severity: %+v", p)
		}
		if p.Line < 0 || p.Column < 0 || (p.Line == 0) != (p.Column == 0) {
			t.Fatalf("bad position: %+v", p)
		}
	}
}

// FuzzLoad writes arbitrary bytes as agent.json and steps_registry.json
// and runs the whole of `capstan validate` on them: it must never panic,
// and every problem must carry a known code and a file.
func FuzzLoad(f *testing.F) {
	seedBytes(f)
	dir := f.TempDir()
	for _, p := range []string{"prompts/system.md", "schemas/review.schema.json", "script.yaml"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644)
	}
	f.Fuzz(func(t *testing.T, agent, registry []byte) {
		if err := os.WriteFile(filepath.Join(dir, AgentFile), agent, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, DefaultRegistryFile), registry, 0o644); err != nil {
			t.Fatal(err)
		}
		sameFailures(t, AgentFile, agent)
		sameFailures(t, DefaultRegistryFile, registry)
		r := Check(dir, testOpts)
		checkProblems(t, r)
		ag, err := LoadAndValidate(dir, testOpts)
		if (err == nil) != r.Valid() {
			t.Fatalf("LoadAndValidate (err %v) disagrees with Check (valid %v)", err, r.Valid())
		}
		if ag != nil {
			// A valid agent resolves its own defaults without panicking.
			vals := map[string]string{}
			for _, p := range ag.Params() {
				if p.Required {
					vals[p.Name] = "1"
				}
			}
			_, _ = ag.ResolveParams(vals)
		}
	})
}

// FuzzValidate runs Validate on arbitrary bytes in memory (no file
// checks), which is fast enough to explore the semantic checks deeply.
func FuzzValidate(f *testing.F) {
	seedBytes(f)
	f.Fuzz(func(t *testing.T, agent, registry []byte) {
		as := newSource(AgentFile, agent)
		rs := newSource(DefaultRegistryFile, registry)
		var def Definition
		var reg Registry
		if decode(as, &def) != nil || decode(rs, &reg) != nil {
			return
		}
		def.src, reg.src = as, rs
		ApplyDefaults(&def, &reg)
		r := Validate(&def, &reg, ValidateOptions{Providers: testOpts.Providers})
		checkProblems(t, r)
		for _, p := range r.Problems() {
			if p.Pointer != "" && p.Line == 0 {
				t.Fatalf("problem with pointer but no position: %s", p)
			}
		}
	})
}

// FuzzResolveParams feeds arbitrary CLI values: never a panic, and every
// value that is accepted satisfies its parameter's type and validation.
func FuzzResolveParams(f *testing.F) {
	f.Add("go tests", "3", "true", "high")
	f.Add("", "NaN", "maybe", "mid")
	f.Add("a\x00b", "1e308", "1", "low")
	f.Add("x", "-0", "F", "")
	a := baseAgent()
	a["parameters"] = map[string]any{
		"topic":   map[string]any{"type": "string", "required": true, "validation": map[string]any{"pattern": "[a-z ]+"}},
		"count":   map[string]any{"type": "number", "default": 3, "validation": map[string]any{"min": 1, "max": 10}},
		"dry_run": map[string]any{"type": "boolean", "default": false},
		"level":   map[string]any{"type": "string", "validation": map[string]any{"enum": []any{"low", "high"}}},
	}
	dir := writeAgent(f, a, baseRegistry(), nil)
	ag, err := LoadAndValidate(dir, testOpts)
	if err != nil {
		f.Fatal(err)
	}
	def := ag.Definition()
	f.Fuzz(func(t *testing.T, topic, count, dry, level string) {
		vars, err := ag.ResolveParams(map[string]string{"topic": topic, "count": count, "dry_run": dry, "level": level})
		if err != nil {
			return
		}
		for name, v := range vars {
			if msg := checkParamValue(def.Parameters[name], v); msg != "" {
				t.Fatalf("accepted %s=%q: %s", name, v, msg)
			}
		}
		if vars["dry_run"] != "true" && vars["dry_run"] != "false" {
			t.Fatalf("boolean not normalised: %q", vars["dry_run"])
		}
	})
}
