package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

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

// gen draws the field values of the payloads selfEncoded builds.
type gen struct {
	str   func() string
	flag  func() bool
	num   func() int64
	float func() float64
	when  func() time.Time
	input func() json.RawMessage
}

// selfEncoded builds one value of every payload type that encodes itself,
// with field values drawn from g.
func selfEncoded(g gen) []journal.AppendJSONer {
	strs, flag, num, input := g.str, g.flag, g.num, g.input
	strList := func() []string {
		if !flag() {
			return nil
		}
		return []string{strs(), strs()}
	}
	usage := func() Usage {
		return Usage{InputTokens: num(), OutputTokens: num(), CacheReadTokens: num(), CacheWriteTokens: num()}
	}
	use := func() ToolUse {
		return ToolUse{ID: strs(), Name: strs(), Input: input(), Output: strs(), IsError: flag(), Denied: flag(), DurationMs: num(), Replayed: flag()}
	}
	msg := func() Message {
		return Message{Role: Role(strs()), Text: strs(), ToolCalls: []ToolCall{{ID: strs(), Name: strs(), Input: input()}},
			ToolResults: []ToolResult{{CallID: strs(), Name: strs(), Content: strs(), IsError: flag()}}, Reasoning: input(), Pinned: flag()}
	}
	anyMap := func() map[string]any {
		if !flag() {
			return nil
		}
		return map[string]any{strs(): strs(), "n": num(), "list": []any{strs(), flag()}}
	}
	m := msg()
	summary := &IterationSummary{Iteration: int(num()), SessionID: strs(), StepID: strs(), Prompt: strs(),
		AssistantResponses: strList(), ToolsUsed: []ToolUse{use(), use()}, DetectedActions: []DetectedAction{{Type: strs(), Detail: input()}},
		ActionResults: []ActionResult{{Action: strs(), Success: flag(), Output: strs()}}, StructuredOutput: input(), Errors: strList(),
		Usage: usage(), CostUSD: g.float(), UsageUnreported: int(num()), Timestamp: g.when(), DurationMs: num()}
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
		use(),
		ModelTurnEvent{Turn: int(num()), StopReason: strs(), ToolCalls: int(num()), Usage: usage(), DurationMs: num(), Query: strs(),
			Message: &m, StructuredOutput: input(), UnreportedAttempts: int(num())},
		SessionMessagesEvent{SessionID: strs(), Messages: []Message{msg(), msg()}, Replace: flag()},
		QueryResult{SessionID: strs(), Responses: strList(), ToolUses: []ToolUse{use()}, StructuredOutput: input(), Usage: usage(),
			CostUSD: g.float(), Turns: int(num()), StopReason: strs(), SessionRenewed: flag(),
			UnreportedAttempts: int(num())},
		CompactionEvent{SessionID: strs(), Window: num(), TokensBefore: num(), TokensAfter: num(), StubbedCalls: strList(),
			StubbedBytes: int(num()), SummarizedMessages: int(num()), SummaryModel: strs(), Summary: strs(), Usage: usage()},
		ModelUsageEvent{Turn: int(num()), Usage: usage(), Unreported: flag()},
		RetryEvent{Provider: strs(), Attempt: int(num()), DelayMs: num(), Code: strs(), Status: int(num()), Message: strs()},
		ToolIntentEvent{ID: strs(), Name: strs(), InputDigest: strs(), Query: strs(), Turn: int(num()), Idempotent: flag()},
		CheckEvent{CompletionResult: CompletionResult{Complete: flag(), Reason: strs(), Declared: flag(),
			Validation: &ValidationResult{Valid: flag(), Pattern: strs(), Params: anyMap(), Validator: strs(),
				Output: &ValidatorOutput{Stdout: strs(), Stderr: strs(), ExitCode: int(num()), Truncated: flag(), TimedOut: flag(),
					DurationMs: num(), Report: strs(), ReportTruncated: flag()},
				Checked: strList(), Runs: []ValidatorRun{{Validator: strs(), Command: strs(), Passed: flag(),
					Output: ValidatorOutput{Stdout: strs(), Stderr: strs(), ExitCode: int(num()), Truncated: flag(), TimedOut: flag(),
						DurationMs: num(), Report: strs(), ReportTruncated: flag()}}}}},
			Verdict: VerdictAction(strs()), Verified: strList(), ClosureVerdict: strs()},
		StepStateEvent{State: StepState{Current: strs(), Visits: map[string]int{strs(): int(num()), strs(): int(num())},
			LastEntered: strs(), Consecutive: int(num()), Retries: int(num()), Completed: flag(), Aborted: flag(),
			Parent:  &ParentState{Step: strs(), Index: int(num()), Retries: int(num())},
			Return:  &ReturnState{Flow: strs(), From: strs(), Target: strs()},
			Outputs: map[string]map[string]any{strs(): anyMap()}},
			Pending: &PendingPrompt{Text: strs(), Source: strs(), Kind: strs(), Validator: strs(), Pattern: strs(), Attempt: int(num()), Max: int(num())}},
		RetryPromptEvent{Kind: strs(), Step: strs(), Pattern: strs(), Validator: strs(), Params: anyMap(), Source: strs(),
			Attempt: int(num()), Max: int(num()), Text: strs(), Warnings: strList()},
		IterationEvent{Summary: summary, Outcome: OutcomeEvent{Complete: flag(), Stop: flag(), Reason: strs(), Error: strs(), Redo: flag()},
			RunUsage: usage(), RunCostUSD: g.float(), StepState: &StepStateEvent{State: StepState{Current: strs(), Visits: map[string]int{strs(): int(num())},
				LastEntered: strs(), Consecutive: int(num()), Retries: int(num()), Completed: flag(), Aborted: flag(),
				Parent: &ParentState{Step: strs(), Index: int(num()), Retries: int(num())}, Return: &ReturnState{Flow: strs(), From: strs(), Target: strs()},
				Outputs: map[string]map[string]any{strs(): anyMap()}}, Pending: &PendingPrompt{Text: strs(), Source: strs(), Kind: strs(), Validator: strs(),
				Pattern: strs(), Attempt: int(num()), Max: int(num())}}},
	}
}

// awkwardFloats are floats at encoding/json's edges: the switch to
// exponent form, exponents of one and two digits, negative zero, the
// largest and smallest, and the values it refuses.
var awkwardFloats = []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-6, 9.99999e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e21, 123456789.125,
	math.MaxFloat64, math.SmallestNonzeroFloat64, -1e-300, 0.000123, math.NaN(), math.Inf(1), math.Inf(-1)}

// awkwardTimes are times MarshalJSON writes in every form (UTC, zone
// offsets, nanoseconds or none) and those it refuses (years outside
// 0–9999, offsets with seconds or of 24 hours or more).
var awkwardTimes = []time.Time{
	{}, time.Date(2026, 11, 21, 9, 45, 0, 123000000, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", -(5*3600+30*60))),
	time.Date(1, 1, 1, 0, 0, 0, 0, time.FixedZone("Y", 14*3600)), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("S", 3600+17)), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("H", 24*3600)),
	time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("M", -23*3600-59*60)), time.Now(),
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
	for _, v := range selfEncoded(gen{zero, no, nought, func() float64 { return 0 }, func() time.Time { return time.Time{} }, func() json.RawMessage { return nil }}) {
		checkSame(t, v)
	}
	for _, s := range awkward {
		for i := range awkwardFloats {
			g := gen{func() string { return s }, func() bool { return true }, func() int64 { return -1 },
				func() float64 { return awkwardFloats[i] }, func() time.Time { return awkwardTimes[i%len(awkwardTimes)] },
				func() json.RawMessage { return json.RawMessage(`{"a": [1, "x"]}`) }}
			for _, v := range selfEncoded(g) {
				checkSame(t, v)
			}
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
		float := func() float64 {
			if r.IntN(4) == 0 {
				return awkwardFloats[r.IntN(len(awkwardFloats))]
			}
			return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
		}
		when := func() time.Time {
			if r.IntN(3) == 0 {
				return awkwardTimes[r.IntN(len(awkwardTimes))]
			}
			return time.Unix(0, r.Int64()).In(time.FixedZone("R", r.IntN(48*3600)-24*3600))
		}
		g := gen{strs, func() bool { return r.IntN(2) == 0 }, num, float, when, func() json.RawMessage { return inputs[r.IntN(len(inputs))] }}
		for _, v := range selfEncoded(g) {
			checkSame(t, v)
		}
	}
}

// FuzzAppendJSON checks every self-encoding payload against encoding/json
// on field values the fuzzer chooses.
func FuzzAppendJSON(f *testing.F) {
	for i, s := range awkward {
		f.Add(s, s+"x", true, int64(7), awkwardFloats[i%len(awkwardFloats)], int64(1764000000123456789), 3600, []byte(`{"k": "v"}`))
	}
	f.Fuzz(func(t *testing.T, s1, s2 string, flag bool, n int64, x float64, unixNano int64, zone int, input []byte) {
		i := 0
		strs := func() string {
			i++
			if i%2 == 0 {
				return s2
			}
			return s1
		}
		when := time.Unix(0, unixNano).In(time.FixedZone("F", zone))
		g := gen{strs, func() bool { flag = !flag; return flag }, func() int64 { return n }, func() float64 { return x },
			func() time.Time { return when }, func() json.RawMessage { return input }}
		for _, v := range selfEncoded(g) {
			checkSame(t, v)
		}
	})
}

// selfEncoded sets every field of every payload type it builds, and of
// the values they carry (recursively: structs, pointers, the elements of
// slices), so a field added to one of them later is compared with
// encoding/json too (and an AppendJSON that leaves it out fails
// TestAppendJSONMatchesEncodingJSON) instead of going unnoticed.
func TestSelfEncodedSetsEveryField(t *testing.T) {
	g := gen{func() string { return "x" }, func() bool { return true }, func() int64 { return 1 }, func() float64 { return 1.5 },
		time.Now, func() json.RawMessage { return json.RawMessage(`{}`) }}
	for _, v := range selfEncoded(g) {
		checkEveryField(t, fmt.Sprintf("%T", v), reflect.ValueOf(v))
	}
}

func checkEveryField(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		checkEveryField(t, path, v.Elem())
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Uint8 {
			for i := range v.Len() {
				checkEveryField(t, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
			}
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set by selfEncoded: set it there so its encoding is checked", path, f.Name)
				continue
			}
			checkEveryField(t, path+"."+f.Name, v.Field(i))
		}
	}
}
