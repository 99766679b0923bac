package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkflowValidateExitCodesAndJSON(t *testing.T) {
	code, out, _ := runPipelineCLI(t, "workflow", "validate", "../../workflow/testdata/issues.json")
	if code != exitOK || !strings.Contains(out, "issues.json: valid (0 warnings)") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "wf.json")
	if err := os.WriteFile(bad, []byte(`{"version":"1","phases":{"a":{"type":"actionable"}},"labelMapping":{"x":"a"},"agents":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runPipelineCLI(t, "workflow", "validate", "--json", bad)
	var res struct {
		Valid  bool
		Errors []struct{ Code string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitUsage || res.Valid {
		t.Fatalf("exit %d err %v\n%s", code, err, out)
	}
	var got []string
	for _, e := range res.Errors {
		got = append(got, e.Code)
	}
	if s := strings.Join(got, " "); !strings.Contains(s, "WF-PHASE-AGENT") || !strings.Contains(s, "WF-PHASE-PRIORITY") || !strings.Contains(s, "WF-EMPTY") {
		t.Fatalf("codes %s", s)
	}
}
