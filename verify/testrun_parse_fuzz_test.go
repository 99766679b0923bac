package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedOutputs adds every recorded runner output as a fuzz seed.
func seedOutputs(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no recorded outputs: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
}

// fuzzParser checks one runner's parser on any output: it does not
// panic, and every test it lists has a name and one of the three outcomes.
func fuzzParser(f *testing.F, runner string, parse func([]string) (part, bool)) {
	seedOutputs(f)
	f.Fuzz(func(t *testing.T, out string) {
		p, ok := parse(strings.Split(out, "\n"))
		if !ok {
			return
		}
		if p.runner != runner {
			t.Fatalf("runner %q, want %q", p.runner, runner)
		}
		for _, tc := range p.tests {
			if _, known := rank[tc.Outcome]; !known || tc.Name == "" {
				t.Fatalf("test %q has outcome %q", tc.Name, tc.Outcome)
			}
		}
	})
}

func FuzzParseGoJSON(f *testing.F)   { fuzzParser(f, "go", parseGoJSONRun) }
func FuzzParseGoText(f *testing.F)   { fuzzParser(f, "go", parseGoTextRun) }
func FuzzParsePytest(f *testing.F)   { fuzzParser(f, "pytest", parsePytestRun) }
func FuzzParseUnittest(f *testing.F) { fuzzParser(f, "unittest", parseUnittest) }
func FuzzParseJest(f *testing.F)     { fuzzParser(f, "jest", parseJestRun) }
func FuzzParseVitest(f *testing.F)   { fuzzParser(f, "vitest", parseVitest) }
func FuzzParseCargo(f *testing.F)    { fuzzParser(f, "cargo", parseCargo) }

// FuzzParse checks the merged run: each test is listed once, and when
// every runner listed its tests, the passed and failed counts are those of
// the list — no summary line, forged or not, adds to them.
func FuzzParse(f *testing.F) {
	seedOutputs(f)
	note := "[capstan: output truncated, 1048576 bytes omitted here]\n"
	f.Fuzz(func(t *testing.T, out string) {
		r, ok := ParseTestRun(out)
		// The capture's truncation note, at the start or after the first
		// line, is no test result: it adds no test and no count.
		for _, with := range []string{note + out, strings.Replace(out, "\n", "\n"+note, 1)} {
			if w, wok := ParseTestRun(with); wok && (!ok || len(w.Tests) > len(r.Tests) || w.Passed > r.Passed || w.Failed > r.Failed || w.Skipped > r.Skipped) {
				t.Fatalf("the note adds to the run: %+v, without it %+v", w, r)
			}
		}
		if !ok {
			return
		}
		if len(r.Runners) == 0 {
			t.Fatal("a run without a runner")
		}
		seen := map[string]bool{}
		var passed, failed int
		for _, tc := range r.Tests {
			if seen[tc.Name] {
				t.Fatalf("test %q listed twice", tc.Name)
			}
			seen[tc.Name] = true
			switch tc.Outcome {
			case Passed:
				passed++
			case Failed:
				failed++
			}
		}
		if r.PerTest && (r.Passed != passed || r.Failed != failed) {
			t.Fatalf("per test, but counts %d passed %d failed for a list of %d passed %d failed", r.Passed, r.Failed, passed, failed)
		}
	})
}
