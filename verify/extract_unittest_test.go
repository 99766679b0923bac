package verify

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// python -m unittest -v failures and errors become failedTests, named by
// their test id, with the traceback's last line as the error; an older
// Python's id without the method gets it appended.
func TestParseTestOutputUnittest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "out", "unittest-v.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []TestFailure{
		{Name: "test_calc.T.test_boom", Error: "ValueError: boom"},
		{Name: "test_calc.T.test_add", Error: "AssertionError: -1 != 5"},
	}
	if got := ParseTestOutput(string(b)); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	old := "FAIL: test_add (tests.test_calc.T)\n----------------------------------------------------------------------\nTraceback (most recent call last):\nAssertionError: 1 != 2\n\n----------------------------------------------------------------------\nRan 1 test in 0.001s\n"
	if got := ParseTestOutput(old); len(got) != 1 || got[0].Name != "tests.test_calc.T.test_add" || got[0].Error != "AssertionError: 1 != 2" {
		t.Errorf("older unittest: %+v", got)
	}
}
