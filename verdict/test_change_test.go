package verdict

import (
	"testing"

	"github.com/capstan-dev/capstan/event"
)

func TestFindTestChangeRequest(t *testing.T) {
	s := &event.IterationSummary{AssistantResponses: []string{
		"The test is wrong.\n**REQUEST_TEST_CHANGE:** `calc_test.go` Add(2, 3) is 5 by the spec\n",
		"> REQUEST_TEST_CHANGE: more_test.go\nREQUEST_TEST_CHANGE: calc_test.go again\nREQUEST_TEST_CHANGE:   \nnot REQUEST_TEST_CHANGE: x_test.go",
	}}
	got := FindTestChangeRequest(s)
	want := []TestChangeAsk{{File: "calc_test.go", Reason: "Add(2, 3) is 5 by the spec"}, {File: "more_test.go"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v", got)
	}
	if FindTestChangeRequest(nil) != nil || FindTestChangeRequest(&event.IterationSummary{AssistantResponses: []string{"TASK_DONE"}}) != nil {
		t.Fatal("a request found where there is none")
	}
}

// FuzzFindTestChangeRequest: any answer parses without panicking, each
// file once, and no file name is empty or holds a space.
func FuzzFindTestChangeRequest(f *testing.F) {
	f.Add("REQUEST_TEST_CHANGE: a_test.go why\nREQUEST_TEST_CHANGE: a_test.go")
	f.Add("**REQUEST_TEST_CHANGE:** `x y` z")
	f.Fuzz(func(t *testing.T, text string) {
		seen := map[string]bool{}
		for _, a := range FindTestChangeRequest(&event.IterationSummary{AssistantResponses: []string{text}}) {
			if a.File == "" || seen[a.File] {
				t.Fatalf("file %q (seen %v)", a.File, seen[a.File])
			}
			seen[a.File] = true
		}
	})
}
