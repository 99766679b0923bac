package agentdir

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

func paramAgent(t *testing.T) *Agent {
	t.Helper()
	a := baseAgent()
	a["parameters"] = map[string]any{
		"topic":   map[string]any{"type": "string", "required": true, "validation": map[string]any{"pattern": "[a-z ]+"}},
		"count":   map[string]any{"type": "number", "default": 3, "validation": map[string]any{"min": 1, "max": 10}},
		"dry_run": map[string]any{"type": "boolean", "default": false},
		"level":   map[string]any{"type": "string", "cli": "--lvl", "validation": map[string]any{"enum": []any{"low", "high"}}},
		"ratio":   map[string]any{"type": "number", "validation": map[string]any{"enum": []any{"0.5", "1"}}},
	}
	dir := writeAgent(t, a, baseRegistry(), nil)
	ag, err := LoadAndValidate(dir, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

func TestResolveParams(t *testing.T) {
	ag := paramAgent(t)
	got, err := ag.ResolveParams(map[string]string{"topic": "go tests", "dry_run": "TRUE", "level": "high", "ratio": "0.50"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"topic": "go tests", "count": "3", "dry_run": "true", "level": "high", "ratio": "0.50"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
		if strings.HasPrefix(k, "uv-") {
			t.Errorf("variable keys carry no uv- prefix: %s", k)
		}
	}
	// An optional parameter without value or default is absent.
	got, err = ag.ResolveParams(map[string]string{"topic": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["level"]; ok {
		t.Errorf("optional parameter without value present: %v", got)
	}
	if got["dry_run"] != "false" {
		t.Errorf("boolean default: %q", got["dry_run"])
	}
}

func TestResolveParamsErrors(t *testing.T) {
	ag := paramAgent(t)
	cases := []struct {
		name   string
		values map[string]string
		code   string
		want   []string
	}{
		{"missing required", map[string]string{}, agenterr.CodeParamMissing, []string{"--topic"}},
		{"empty required", map[string]string{"topic": "  "}, agenterr.CodeParamMissing, []string{"--topic"}},
		{"not a number", map[string]string{"topic": "x", "count": "many"}, agenterr.CodeParamInvalid, []string{"--count", "not a number"}},
		{"NaN is not a number", map[string]string{"topic": "x", "count": "NaN"}, agenterr.CodeParamInvalid, []string{"--count"}},
		{"below min", map[string]string{"topic": "x", "count": "0"}, agenterr.CodeParamInvalid, []string{"--count", "minimum"}},
		{"above max", map[string]string{"topic": "x", "count": "11"}, agenterr.CodeParamInvalid, []string{"--count", "maximum"}},
		{"bad boolean", map[string]string{"topic": "x", "dry_run": "maybe"}, agenterr.CodeParamInvalid, []string{"--dry-run"}},
		{"pattern is anchored", map[string]string{"topic": "abc; rm -rf /"}, agenterr.CodeParamInvalid, []string{"--topic", "pattern"}},
		{"enum", map[string]string{"topic": "x", "level": "mid"}, agenterr.CodeParamInvalid, []string{"--lvl", "low, high"}},
		{"number enum", map[string]string{"topic": "x", "ratio": "2"}, agenterr.CodeParamInvalid, []string{"--ratio"}},
		{"unknown", map[string]string{"topic": "x", "colour": "red"}, agenterr.CodeParamUnknown, []string{"colour"}},
		{"several at once", map[string]string{"count": "99"}, agenterr.CodeParamMissing, []string{"--topic", "--count"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ag.ResolveParams(tc.values)
			if agenterr.CodeOf(err) != tc.code {
				t.Fatalf("code %q, want %q (%v)", agenterr.CodeOf(err), tc.code, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if e := agenterr.From(err); e.Layer != agenterr.LayerConfiguration || e.Hint == "" {
				t.Errorf("error lacks layer or hint: %+v", e)
			}
		})
	}
	_, err := ag.ResolveParams(nil)
	if !errors.Is(err, agenterr.ErrParamMissing) {
		t.Fatalf("errors.Is PARAM_MISSING: %v", err)
	}
}

func TestParams(t *testing.T) {
	ps := paramAgent(t).Params()
	byName := map[string]Param{}
	for _, p := range ps {
		byName[p.Name] = p
	}
	if p := byName["dry_run"]; p.Flag != "--dry-run" || !p.HasDefault || p.Default != "false" {
		t.Errorf("dry_run: %+v", p)
	}
	if p := byName["level"]; p.Flag != "--lvl" || p.HasDefault {
		t.Errorf("level: %+v", p)
	}
	if p := byName["topic"]; !p.Required {
		t.Errorf("topic: %+v", p)
	}
}

// The ValidationResult invariant valid == (len(errors) == 0) holds for any
// set of problems and survives a JSON round trip, even when the JSON lies.
func TestValidationResultInvariant(t *testing.T) {
	sets := [][]Problem{
		nil,
		{{Code: "X", Severity: SeverityWarning}},
		{{Code: "X", Severity: SeverityError}},
		{{Code: "X", Severity: "bogus"}},
		{{Code: "A", Severity: SeverityWarning}, {Code: "B", Severity: SeverityError}},
	}
	for _, ps := range sets {
		r := NewValidationResult(ps...)
		if r.Valid() != (len(r.Errors()) == 0) {
			t.Fatalf("invariant broken for %v", ps)
		}
		if len(r.Errors())+len(r.Warnings()) != len(ps) {
			t.Fatalf("problems lost: %v", ps)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back ValidationResult
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Valid() != r.Valid() || len(back.Problems()) != len(r.Problems()) {
			t.Fatalf("round trip changed the result: %s", b)
		}
		r2 := r.With(Problem{Code: "Y", Severity: SeverityError})
		if r2.Valid() || len(r2.Problems()) != len(ps)+1 {
			t.Fatal("With lost or misclassified a problem")
		}
	}
	var lie ValidationResult
	if err := json.Unmarshal([]byte(`{"valid":true,"errors":[{"code":"X","severity":"error"}],"warnings":[]}`), &lie); err != nil {
		t.Fatal(err)
	}
	if lie.Valid() {
		t.Fatal("valid was trusted from JSON")
	}
	var empty ValidationResult
	b, _ := json.Marshal(empty)
	if string(b) != `{"valid":true,"errors":[],"warnings":[]}` {
		t.Fatalf("zero result JSON: %s", b)
	}
}
