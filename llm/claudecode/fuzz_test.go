package claudecode

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
)

func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"system","subtype":"init","session_id":"s","tools":["Read"],"new":{"a":1}}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]},"parent_tool_use_id":null}`,
		`{"type":"result","subtype":"success","is_error":false,"usage":{"input_tokens":1},"num_turns":"NaN"}`,
		`{"type":"user","message":{"content":"plain"}}`,
		`{"type":1}`, `[]`, `null`, `{"type":"result","permission_denials":[{"tool_use_id":5}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, err := ParseFrame(line)
		if err != nil {
			return
		}
		if fr.Type == "" {
			t.Fatal("accepted a frame without type")
		}
		// Known fields that failed to decode are kept, never dropped.
		var all map[string]json.RawMessage
		if json.Unmarshal(line, &all) != nil {
			t.Fatal("accepted a non-object")
		}
		st := &state{res: &event.QueryResult{}, uses: map[string]int{}, started: map[string]time.Time{}, requested: "r", events: nopEmitter{}}
		st.frame(&fr) // must not panic on any shape
		_, _ = parseMessage(fr.Message)
	})
}

func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\n\n  b  \nc"), 4)
	f.Add([]byte(strings.Repeat("x", 70000)+"\n"), 100000)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<20 {
			max = 1 << 20
		}
		lr := newLineReader(bytes.NewReader(data), max)
		var got [][]byte
		for {
			line, err := lr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return // over the limit
			}
			if len(line) == 0 || bytes.ContainsRune(line, '\n') {
				t.Fatalf("bad line %q", line)
			}
			got = append(got, append([]byte(nil), line...))
		}
		var want [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 {
				want = append(want, l)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("got %d lines, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("line %d = %q, want %q", i, got[i], want[i])
			}
		}
	})
}

type nopEmitter struct{}

func (nopEmitter) Emit(event.Payload) {}
