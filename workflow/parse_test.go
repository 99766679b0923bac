package workflow

import (
	"os"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
)

func codes(ps []agentdir.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Code)
	}
	return out
}

func TestParseKeepsLabelOrderAndDefaults(t *testing.T) {
	w, res := Load("testdata/issues.json")
	if !res.Valid() || len(res.Warnings()) != 0 {
		t.Fatalf("problems: %v", res.Problems())
	}
	var labels []string
	for _, lp := range w.LabelMapping {
		labels = append(labels, lp.Label)
	}
	if got := strings.Join(labels, ","); got != "kind:impl,kind:detail,kind:consider,done,need clearance" {
		t.Fatalf("label order = %s", got)
	}
	if w.Rules.MaxCycles != 7 || w.Rules.CycleDelayMs != 0 || w.Rules.MaxConsecutivePhases != 3 {
		t.Fatalf("rules = %+v", w.Rules)
	}
	if w.SubjectStorePath != DefaultSubjectStore || w.ID() != "default" {
		t.Fatalf("store %q id %q", w.SubjectStorePath, w.ID())
	}
	if a := w.Agents["considerer"]; a.Role != Validator || a.CloseCondition != "done" || !a.CloseOnComplete {
		t.Fatalf("considerer = %+v", a)
	}
}

// TestParseReportsEveryProblem feeds one broken field at a time and
// checks the code, the severity and that the problem points at a line.
func TestParseReportsEveryProblem(t *testing.T) {
	base := `{"version":"1","phases":{"a":{"type":"actionable","priority":1,"agent":"x"},"d":{"type":"terminal"},"b":{"type":"blocking"}},
"labelMapping":{"go":"a","done":"d","stop":"b"},"agents":{"x":{"role":"transformer","outputPhase":"d","fallbackPhase":"b"}}`
	cases := []struct {
		name, json, code string
		sev              agentdir.Severity
	}{
		{"not json", `{"version":`, CodeJSON, agentdir.SeverityError},
		{"missing phases", `{"version":"1","labelMapping":{"a":"b"},"agents":{}}`, CodeRequired, agentdir.SeverityError},
		{"unknown top field", base + `,"phasez":{}}`, CodeUnknownField, agentdir.SeverityWarning},
		{"bad phase type", strings.Replace(base, `"type":"blocking"`, `"type":"stop"`, 1) + `}`, CodePhaseType, agentdir.SeverityError},
		{"actionable without agent", strings.Replace(base, `,"agent":"x"`, ``, 1) + `}`, CodePhaseAgent, agentdir.SeverityError},
		{"actionable without priority", strings.Replace(base, `"priority":1,`, ``, 1) + `}`, CodePhasePrio, agentdir.SeverityError},
		{"unknown agent", strings.Replace(base, `"agent":"x"`, `"agent":"y"`, 1) + `}`, CodeRefAgent, agentdir.SeverityError},
		{"label to unknown phase", strings.Replace(base, `"go":"a"`, `"go":"zz"`, 1) + `}`, CodeRefPhase, agentdir.SeverityError},
		{"unknown output phase", strings.Replace(base, `"outputPhase":"d"`, `"outputPhase":"q"`, 1) + `}`, CodeRefPhase, agentdir.SeverityError},
		{"bad role", strings.Replace(base, `"role":"transformer"`, `"role":"judge"`, 1) + `}`, CodeRole, agentdir.SeverityError},
		{"maxCycles 0", base + `,"rules":{"maxCycles":0}}`, CodeRule, agentdir.SeverityError},
		{"negative delay", base + `,"rules":{"cycleDelayMs":-1}}`, CodeRule, agentdir.SeverityError},
		{"rate limit inert", base + `,"rules":{"rateLimitThreshold":0.9}}`, CodeInert, agentdir.SeverityWarning},
		{"closeCondition alone", strings.Replace(base, `"fallbackPhase":"b"`, `"fallbackPhase":"b","closeCondition":"success"`, 1) + `}`, CodeCloseCond, agentdir.SeverityError},
		{"label spec missing", base + `,"labels":{"go":{"color":"ffffff","description":"g"}}}`, CodeLabelSpec, agentdir.SeverityError},
		{"label color", base + `,"labels":{"go":{"color":"#fff","description":"g"},"done":{"color":"ffffff"},"stop":{"color":"ffffff"}}}`, CodeLabelSpec, agentdir.SeverityError},
		{"template never posted", base + `,"handoff":{"commentTemplates":{"xSucces":"hi"}}}`, CodeTemplateUnused, agentdir.SeverityWarning},
		{"priority on terminal", strings.Replace(base, `"d":{"type":"terminal"}`, `"d":{"type":"terminal","priority":2}`, 1) + `}`, CodeInert, agentdir.SeverityWarning},
		{"duplicate key", base + `,"version":"2"}`, CodeDuplicateKey, agentdir.SeverityError},
		{"bad payload expr", base + `,"handoffs":[{"id":"h","when":{"fromAgent":"x","outcome":"success"},"emit":{"type":"t","schemaRef":"s","path":"p"},"payloadFrom":{"k":"agent.result.x"},"persistPayloadTo":"none"}]}`, CodeHandoff, agentdir.SeverityError},
		{"handoff from undispatched agent", base + `,"handoffs":[{"id":"h","when":{"fromAgent":"rev","outcome":"ok"},"emit":{"type":"t","schemaRef":"s","path":"p"},"payloadFrom":{"k":"'v'"},"persistPayloadTo":"none"}]}`, CodeHandoffUnreached, agentdir.SeverityWarning},
		{"phase without label", strings.Replace(base, `"stop":"b"`, `"halt":"d"`, 1) + `}`, CodePhaseNoLabel, agentdir.SeverityWarning},
		{"close never happens", strings.Replace(base, `"outputPhase":"d","fallbackPhase":"b"`, `"outputPhase":"b","fallbackPhase":"b","closeOnComplete":true`, 1) + `}`, CodeInert, agentdir.SeverityWarning},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, res := Parse("wf.json", []byte(c.json))
			var found *agentdir.Problem
			for _, p := range res.Problems() {
				if p.Code == c.code {
					found = &p
					break
				}
			}
			if found == nil {
				t.Fatalf("no %s in %v", c.code, res.Problems())
			}
			if found.Severity != c.sev {
				t.Fatalf("%s is %s, want %s", c.code, found.Severity, c.sev)
			}
			if found.File != "wf.json" || (c.code != CodeRequired && found.Line == 0) {
				t.Fatalf("problem not located: %+v", *found)
			}
			if c.sev == agentdir.SeverityWarning && !res.Valid() {
				t.Fatalf("a warning case is invalid: %v", res.Errors())
			}
		})
	}
}

func TestTemplateKeyHintNamesTheKeyALookupUses(t *testing.T) {
	raw, err := os.ReadFile("testdata/issues.json")
	if err != nil {
		t.Fatal(err)
	}
	// climpt's own spelling: camel case, which its lookup never produces.
	s := strings.Replace(string(raw), `"considererHandoff-detail"`, `"considererHandoffDetail"`, 1)
	_, res := Parse("wf.json", []byte(s))
	var hint string
	for _, p := range res.Warnings() {
		if p.Code == CodeTemplateUnused {
			hint = p.Hint
		}
	}
	if !strings.Contains(hint, `"considererHandoff-detail"`) {
		t.Fatalf("hint = %q", hint)
	}
	// The hint's spelling is the one the engine looks up.
	if keys := templateKeys("considerer", "handoff-detail"); keys[0] != "considererHandoff-detail" {
		t.Fatalf("keys = %v", keys)
	}
}

func FuzzParse(f *testing.F) {
	raw, _ := os.ReadFile("testdata/issues.json")
	f.Add(raw)
	f.Add([]byte(`{"phases":[],"agents":{"a":{"role":1}}}`))
	f.Add([]byte(`{"handoffs":[{"payloadFrom":{"a":"${payload.x}"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, res := Parse("f.json", b)
		if w == nil && res.Valid() {
			t.Fatal("no workflow but valid")
		}
	})
}
