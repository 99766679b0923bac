package event

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/capstan-dev/capstan/journal"
)

// awkward are strings encoding/json escapes or replaces: quotes,
// backslashes, every kind of control character, HTML characters (not
// escaped by the journal), invalid and truncated UTF-8, U+2028/U+2029,
// multi-byte runes, DEL.
var awkward = []string{
	"", "plain", `say "hi"`, `back\slash`, "\b\f\n\r\t", "\x00\x01\x1f", "\x7f",
	"<script>&amp;</script>", "\xff\xfe", "caf\xc3", "\xe2\x80\xa8 and \xe2\x80\xa9", "日本語 ✓ 🚀",
	"\xed\xa0\x80", "tail\\", "\u00e9\u0301", "a\x00b\"c\\d\ne\u2028f\xffg",
}

// selfEncoded builds one value of every payload type that encodes itself,
// with field values drawn from strs, flags and nums.
func selfEncoded(strs func() string, flag func() bool, num func() int64, input json.RawMessage) []journal.AppendJSONer {
	return []journal.AppendJSONer{
		IterationStartEvent{Iteration: int(num())},
		PromptEvent{Source: strs(), Text: strs(), Iteration: int(num()), Step: strs()},
		QueryStartEvent{SessionID: strs(), Source: strs(), Model: strs()},
		StepMove{From: strs(), To: strs(), Kind: strs(), Passed: flag(), Complete: flag(), Aborted: flag(), Reason: strs(), Intent: strs()},
		LifecycleEvent{State: strs()},
		WarningEvent{Message: strs(), SessionID: strs()},
		ErrorEvent{Code: strs(), Message: strs(), Recoverable: flag()},
		ValidatorEvent{Validator: strs(), Type: strs(), Valid: flag(), Pattern: strs(), ExitCode: int(num()), TimedOut: flag(),
			Truncated: flag(), DurationMs: num(), Output: strs(), OutputOmitted: int(num())},
		ToolUse{ID: strs(), Name: strs(), Input: input, Output: strs(), IsError: flag(), Denied: flag(), DurationMs: num(), Replayed: flag()},
	}
}

// encodingJSON is what the journal wrote for v before payloads encoded
// themselves.
func encodingJSON(t testing.TB, v any) ([]byte, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

func checkSame(t testing.TB, v journal.AppendJSONer) {
	t.Helper()
	want, ok := encodingJSON(t, v)
	got := v.AppendJSON([]byte("prefix"))
	if !ok {
		if got != nil {
			t.Fatalf("%T: encoding/json refuses %#v, AppendJSON gave %s", v, v, got)
		}
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("%T %#v:\nAppendJSON    %s\nencoding/json prefix%s", v, v, got, want)
	}
}

// TestAppendJSONMatchesEncodingJSON checks every self-encoding payload
// against encoding/json on zero values, on every awkward string in every
// field, and on random mixes of them with random flags and numbers.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	zero := func() string { return "" }
	no := func() bool { return false }
	nought := func() int64 { return 0 }
	for _, v := range selfEncoded(zero, no, nought, nil) {
		checkSame(t, v)
	}
	for _, s := range awkward {
		for _, v := range selfEncoded(func() string { return s }, func() bool { return true }, func() int64 { return -1 }, json.RawMessage(`{"a": [1, "x"]}`)) {
			checkSame(t, v)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	inputs := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(" {\n \"file_path\" : \"a<b>&\\u2028\" } "),
		json.RawMessage(`"just a string"`), json.RawMessage(`[1, 2.5e3, true, null]`), json.RawMessage(`{not json`), json.RawMessage{}}
	for i := 0; i < 2000; i++ {
		strs := func() string {
			var b []byte
			for n := r.IntN(4); n > 0; n-- {
				b = append(b, awkward[r.IntN(len(awkward))]...)
			}
			return string(b)
		}
		num := func() int64 { return r.Int64N(1<<40) - 1<<39 }
		for _, v := range selfEncoded(strs, func() bool { return r.IntN(2) == 0 }, num, inputs[r.IntN(len(inputs))]) {
			checkSame(t, v)
		}
	}
}

// FuzzAppendJSON checks every self-encoding payload against encoding/json
// on field values the fuzzer chooses.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s+"x", true, int64(7), []byte(`{"k": "v"}`))
	}
	f.Fuzz(func(t *testing.T, s1, s2 string, flag bool, n int64, input []byte) {
		i := 0
		strs := func() string {
			i++
			if i%2 == 0 {
				return s2
			}
			return s1
		}
		for _, v := range selfEncoded(strs, func() bool { flag = !flag; return flag }, func() int64 { return n }, input) {
			checkSame(t, v)
		}
	})
}

// selfEncoded sets every field of every payload type it builds, so a field
// added to one of them later is compared with encoding/json too (and an
// AppendJSON that leaves it out fails TestAppendJSONMatchesEncodingJSON)
// instead of going unnoticed.
func TestSelfEncodedSetsEveryField(t *testing.T) {
	for _, v := range selfEncoded(func() string { return "x" }, func() bool { return true }, func() int64 { return 1 }, json.RawMessage(`{}`)) {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if f := rv.Type().Field(i); f.IsExported() && rv.Field(i).IsZero() {
				t.Errorf("%T.%s is not set by selfEncoded: set it there so its encoding is checked", v, f.Name)
			}
		}
	}
}
