package llm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
)

const loopSecret = "sk-loop-secret-0123456789"

// TestToolLoopRedactsSecretsTheModelWrites: a model that knows a key
// echoes it in its text, in a Write input (once plainly, once with JSON
// escapes) and in its structured output. Neither the journal, the result,
// the written file nor the next request carries the value.
func TestToolLoopRedactsSecretsTheModelWrites(t *testing.T) {
	escaped := `sk-loop-\u0073ecret-0123456789`
	f := newFixture(t, `turns:
  - text: "the key is `+loopSecret+`"
    tool_calls:
      - name: Write
        input: {file_path: leak.txt, content: "`+loopSecret+`"}
      - name: Write
        input: {file_path: leak2.txt, content: "`+escaped+`"}
  - text: "done, key `+loopSecret+`"
`, func(c *llm.Config) {
		c.Redact = proc.SecretRedactor([]string{"LOOP_API_KEY=" + loopSecret})
	})
	res, err := f.loop.Query(t.Context(), "write the key", writeAll)
	if err != nil {
		t.Fatal(err)
	}
	// A second query sends the first one's transcript; the recorder keeps
	// the request before the (exhausted) script answers it.
	_, _ = f.loop.Query(t.Context(), "again", llm.QueryOptions{SessionID: res.SessionID})
	b, err := os.ReadFile(f.journal.Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), loopSecret) || !strings.Contains(string(b), proc.Redacted) {
		t.Errorf("journal holds the key or no redaction:\n%s", b)
	}
	out, _ := json.Marshal(res)
	if strings.Contains(string(out), loopSecret) {
		t.Errorf("result holds the key: %s", out)
	}
	for _, name := range []string{"leak.txt", "leak2.txt"} {
		if got, err := os.ReadFile(filepath.Join(f.work, name)); err != nil || string(got) != proc.Redacted {
			t.Errorf("%s = %q, %v; want %q", name, got, err, proc.Redacted)
		}
	}
	reqs := f.rec.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, req := range reqs {
		msgs, _ := json.Marshal(req.Messages)
		if strings.Contains(string(msgs), loopSecret) || strings.Contains(string(msgs), `\u0073ecret`) {
			t.Errorf("request %d carries the key: %s", i+1, msgs)
		}
	}
	if n := len(f.events(journal.SessionMessages)); n == 0 {
		t.Error("no session.messages event")
	}
}

func TestRedactorJSON(t *testing.T) {
	r := llm.Redactor(proc.SecretRedactor([]string{"X_TOKEN=tok-12345678", `Q_SECRET=a"b\c-12345678`, "PIN_SECRET=1234567890123"}))
	for _, c := range []struct{ in, want string }{
		{`{"a":"tok-12345678"}`, `{"a":"[REDACTED]"}`},
		{`{"a":"tok-\u0031\u0032345678 and more"}`, `{"a":"[REDACTED] and more"}`},
		{`{"tok-12345678":1}`, `{"[REDACTED]":1}`},
		{`{"a":"a\"b\\c-12345678"}`, `{"a":"[REDACTED]"}`},
		{`{"a":["x",{"b":"tok-12345678\n"}]}`, `{"a":["x",{"b":"[REDACTED]\n"}]}`},
		{`not json tok-12345678`, `not json [REDACTED]`},
		{`{"a":"<b>&\n"}`, `{"a":"<b>&\n"}`},
		// A secret made of digits, written as a JSON number: the number
		// becomes the redacted string (there is no redacted number).
		{`{"pin":1234567890123}`, `{"pin":"[REDACTED]"}`},
		{`{"a":"\u0078","n":[1,-9991234567890123.5]}`, `{"a":"x","n":[1,"-999[REDACTED].5"]}`},
		{`1234567890123`, `"[REDACTED]"`},
		{`{"n":12345}`, `{"n":12345}`},
	} {
		if got := string(r.JSON(json.RawMessage(c.in))); got != c.want {
			t.Errorf("JSON(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	var none llm.Redactor
	if got := string(none.JSON(json.RawMessage(`{"a":"tok-12345678"}`))); got != `{"a":"tok-12345678"}` {
		t.Errorf("nil redactor changed input: %s", got)
	}
	if proc.SecretRedactor([]string{"PATH=/usr/bin", "SHORT_TOKEN=abc"}) != nil {
		t.Error("SecretRedactor without secret values is not nil")
	}
}

// TestToolLoopRedactsCallNamesAndIDs: the name and id of a tool call are
// written by the model too (a made-up tool name, the id on servers that
// let the model choose it); a key in them reaches neither the journal,
// the result nor the next request.
func TestToolLoopRedactsCallNamesAndIDs(t *testing.T) {
	m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: []event.ToolCall{
		{ID: "id-" + loopSecret, Name: "fetch_" + loopSecret, Input: json.RawMessage(`{}`)},
		{ID: "id-" + loopSecret, Name: "Other", Input: json.RawMessage(`{}`)},
	}}}}}
	events := &typedEvents{}
	bridge := llm.NewToolLoop(m, llm.Config{Events: events, Redact: proc.SecretRedactor([]string{"LOOP_API_KEY=" + loopSecret})})
	res, err := bridge.Query(t.Context(), "go", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	seen, _ := json.Marshal(m.Seen)
	for what, b := range map[string][]byte{"result": out, "next request": seen} {
		if strings.Contains(string(b), loopSecret) {
			t.Errorf("%s holds the key: %s", what, b)
		}
	}
	for _, ev := range events.events {
		if strings.Contains(string(ev.Data), loopSecret) {
			t.Errorf("%s event holds the key: %s", ev.Type, ev.Data)
		}
	}
	// The redacted ids are still distinct, each answered once.
	tr := bridge.Transcript(res.SessionID)
	if a, b := tr[1].ToolCalls[0].ID, tr[1].ToolCalls[1].ID; a == b || tr[2].ToolResults[0].CallID != a || tr[2].ToolResults[1].CallID != b {
		t.Errorf("ids %q, %q answered by %+v", a, b, tr[2].ToolResults)
	}
}
