package verify

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"github.com/capstan-dev/capstan/event"
	"path/filepath"
	"strconv"
	"strings"
)

// Sources of a Run.
const (
	// SourceOutput: the run was read from what the test command printed
	// (its text, within the output cap).
	SourceOutput = ""
	// SourceReport: the run was read from a machine-readable report in
	// the command's whole standard output (go test -json, jest --json,
	// vitest --reporter=json, pytest's JUnit XML).
	SourceReport = "report"
)

// ParseReport reads the machine-readable test reports in data, a test
// command's standard output: go test -json's events, the JSON that jest
// --json and vitest --reporter=json print, and JUnit XML documents (the
// report capstan asks pytest for, --junitxml=/dev/stdout). Every report
// found counts; the text around them is not read (so a result line
// printed by the code under test is not taken for one). ok is false when
// data holds none. dir, when set, is the work dir: jest's and vitest's
// absolute file paths under it are named relative to it.
//
// Tests are named exactly as the report names them: go
// "pkg.TestName/sub", pytest its node id "tests/test_x.py::test_a[a b]"
// (from the JUnit testcase's file, classname and name; spaces, brackets
// or any other character included), jest and
// vitest "file › describe › … › title", with " [#2]", " [#3]", … after
// the second and later tests of one file that have the same title path
// (describe.each, a copied test), so that losing one of them is seen.
func ParseReport(data []byte, dir string) (event.TestRun, bool) {
	var parts []part
	if bytes.Contains(data, []byte(`"Action"`)) {
		if p, ok := parseGoJSONRun(strings.Split(string(data), "\n")); ok {
			parts = append(parts, p)
		}
	}
	if p, ok := parseJestJSON(data, dir); ok {
		parts = append(parts, p)
	}
	if p, ok := parseJUnit(data); ok {
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return event.TestRun{}, false
	}
	r := combine(parts)
	r.Source = SourceReport
	return r, true
}

// --- jest --json, vitest --reporter=json ---

// jestReport is the part of jest's JSON result (which vitest's json
// reporter also prints) that names the tests.
type jestReport struct {
	TestResults *[]struct {
		Name             string `json:"name"`
		AssertionResults []struct {
			AncestorTitles []string `json:"ancestorTitles"`
			Title          string   `json:"title"`
			Status         string   `json:"status"`
		} `json:"assertionResults"`
	} `json:"testResults"`
	NumTotalTests *int `json:"numTotalTests"`
}

// jestOutcome maps an assertion result's status; any other status (todo,
// pending, disabled, focused's siblings) is a test that did not run.
var jestOutcome = map[string]event.TestOutcome{"passed": Passed, "failed": Failed}

// parseJestJSON finds the JSON result lines in data (each printed on a
// line of its own) and reads every one.
func parseJestJSON(data []byte, dir string) (part, bool) {
	p := part{runner: "jest", perTest: true, counted: true}
	found := false
	for len(data) > 0 {
		i := bytes.Index(data, []byte(`{"`))
		if i < 0 {
			break
		}
		data = data[i:]
		end := bytes.IndexByte(data, '\n')
		line := data
		if end >= 0 {
			line, data = data[:end], data[end+1:]
		} else {
			data = nil
		}
		if !bytes.Contains(line, []byte(`"testResults"`)) || !bytes.Contains(line, []byte(`"numTotalTests"`)) {
			continue
		}
		var rep jestReport
		if json.Unmarshal(bytes.TrimSpace(line), &rep) != nil || rep.TestResults == nil || rep.NumTotalTests == nil {
			continue
		}
		found = true
		if p.runner == "jest" && bytes.Contains(line, []byte(`"numTodoTests"`)) && !bytes.Contains(line, []byte(`"openHandles"`)) {
			p.runner = "vitest"
		}
		for _, f := range *rep.TestResults {
			file := f.Name
			if dir != "" && filepath.IsAbs(file) {
				if rel, err := filepath.Rel(dir, file); err == nil && filepath.IsLocal(rel) {
					file = filepath.ToSlash(rel)
				}
			}
			seen := map[string]int{}
			for _, a := range f.AssertionResults {
				name := file
				for _, t := range a.AncestorTitles {
					name += " › " + t
				}
				name += " › " + a.Title
				seen[name]++
				if n := seen[name]; n > 1 {
					name += " [#" + strconv.Itoa(n) + "]"
				}
				o, ok := jestOutcome[a.Status]
				if !ok {
					o = Skipped
				}
				p.tests = append(p.tests, event.TestCase{Name: name, Outcome: o})
			}
		}
	}
	return p, found
}

// --- JUnit XML (pytest --junitxml) ---

// junitName is a test case's pytest node id when the case names its file
// (junit_family=xunit1, which capstan asks pytest for): the file, then
// the classes of classname after the file's module, then the name
// ("tests/test_x.py::TestK::test_m[a b]"); otherwise "classname::name".
func junitName(c junitCase) string {
	if c.File != "" {
		module := strings.ReplaceAll(strings.TrimSuffix(c.File, ".py"), "/", ".")
		if c.Classname == module {
			return c.File + "::" + c.Name
		}
		if classes, ok := strings.CutPrefix(c.Classname, module+"."); ok {
			return c.File + "::" + strings.ReplaceAll(classes, ".", "::") + "::" + c.Name
		}
	}
	if c.Classname == "" {
		return c.Name
	}
	return c.Classname + "::" + c.Name
}

type junitCase struct {
	Classname string    `xml:"classname,attr"`
	File      string    `xml:"file,attr"`
	Name      string    `xml:"name,attr"`
	Failure   *struct{} `xml:"failure"`
	Error     *struct{} `xml:"error"`
	Skipped   *struct{} `xml:"skipped"`
}

// parseJUnit reads every JUnit XML document in data (each starts with
// "<?xml"; pytest writes its report after its terminal output). A testcase
// with a failure or error failed, one with skipped (xfail included) was
// skipped, any other passed. pytest reports an error in a test's teardown
// as a second testcase of the same name: the worst outcome counts.
func parseJUnit(data []byte) (part, bool) {
	p := part{runner: "pytest", perTest: true, counted: true}
	found := false
	for {
		i := bytes.Index(data, []byte("<?xml"))
		if i < 0 {
			break
		}
		doc := data[i:]
		data = data[i+len("<?xml"):]
		d := xml.NewDecoder(bytes.NewReader(doc))
		d.Strict = true
		depth, suite := 0, false
		var cases []event.TestCase
	read:
		for {
			// A document cut short (a report past its bound) or broken
			// counts up to where it ends.
			tok, err := d.Token()
			if err != nil {
				break
			}
			switch t := tok.(type) {
			case xml.StartElement:
				depth++
				switch t.Name.Local {
				case "testsuites", "testsuite":
					suite = true
				case "testcase":
					var c junitCase
					if err := d.DecodeElement(&c, &t); err != nil {
						break read
					}
					depth--
					name := junitName(c)
					o := Passed
					switch {
					case c.Failure != nil || c.Error != nil:
						o = Failed
					case c.Skipped != nil:
						o = Skipped
					}
					cases = append(cases, event.TestCase{Name: name, Outcome: o})
				}
			case xml.EndElement:
				depth--
				if depth == 0 {
					break read
				}
			}
		}
		if suite {
			found = true
			p.tests = append(p.tests, cases...)
		}
	}
	return p, found
}
