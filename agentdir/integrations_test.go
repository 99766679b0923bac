package agentdir

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestExpandContext(t *testing.T) {
	vals := map[string]string{"pr": "42", "path": "a b/$(x)"}
	get := func(n string) (string, bool) { v, ok := vals[n]; return v, ok }
	out, missing, ok := ExpandContext("--pr=${context.pr} ${context. path }", get)
	if !ok || missing != "" || out != "--pr=42 a b/$(x)" {
		t.Fatalf("%q %q %v", out, missing, ok)
	}
	if _, missing, ok := ExpandContext("${context.pr}${context.nope}", get); ok || missing != "nope" {
		t.Fatalf("missing %q %v", missing, ok)
	}
	if got := ContextRefs("x${context.a}y${context. b}${other}"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("refs %q", got)
	}
}

func TestGitHubLabelsRoundTrip(t *testing.T) {
	in := `{"blocked":"need clearance","completion":{"add":["done"],"remove":["in-progress"]},"inProgress":"in-progress"}`
	var l GitHubLabels
	if err := json.Unmarshal([]byte(in), &l); err != nil {
		t.Fatal(err)
	}
	if l.Completion == nil || l.Completion.Add[0] != "done" || l.Named["blocked"] != "need clearance" || len(l.Named) != 2 {
		t.Fatalf("%+v", l)
	}
	out, err := json.Marshal(l)
	if err != nil || string(out) != `{"completion":{"add":["done"],"remove":["in-progress"]},"blocked":"need clearance","inProgress":"in-progress"}` {
		t.Fatalf("%s %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"blocked": 3, "review": "r"}`), &l); err != nil || len(l.Named) != 1 || l.Named["review"] != "r" {
		t.Fatalf("wrong type: %+v %v", l, err)
	}
}

func FuzzExpandContext(f *testing.F) {
	f.Add("${context.a}-${context.b}", "1")
	f.Add("${context.}${context", "")
	f.Fuzz(func(t *testing.T, arg, val string) {
		out, missing, ok := ExpandContext(arg, func(string) (string, bool) { return val, true })
		if !ok || missing != "" {
			t.Fatalf("every name has a value, yet %q is missing", missing)
		}
		if len(ContextRefs(arg)) == 0 && out != arg {
			t.Fatalf("no reference but %q became %q", arg, out)
		}
	})
}

// A label of the wrong type is left out, and the others are kept,
// whichever key the decoder meets first (a map's order), so one file
// always decodes alike; it is no error here, which would stop
// encoding/json decoding the rest of agent.json (the schema reports it).
func TestGitHubLabelsWrongTypeIsLeftOut(t *testing.T) {
	in := []byte(`{"a":"x","completion":{"add":["done"]},"b":"y","c":true,"d":"z","e":"w"}`)
	for range 64 {
		var l GitHubLabels
		if err := json.Unmarshal(in, &l); err != nil {
			t.Fatal(err)
		}
		if _, ok := l.Named["c"]; ok || len(l.Named) != 4 || l.Completion == nil || l.Completion.Add[0] != "done" {
			t.Fatalf("labels after a wrong type: %+v", l)
		}
	}
}
