package verify

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
)

// bigSuite prints about 2 MiB of passing go test -v lines, then a failing
// test and go test's summary: the failure is at the end, past the cap.
const bigSuite = `awk 'BEGIN { for (i = 0; i < 45000; i++) printf "=== RUN   TestPass%d\n--- PASS: TestPass%d (0.00s)\n", i, i }'; ` +
	`echo '=== RUN   TestAdd'; echo '    calc_test.go:9: Add(2, 3) = 6, want 5'; echo '--- FAIL: TestAdd (0.00s)'; echo FAIL; ` +
	`echo 'FAIL	example.com/calc	0.123s'; exit 1`

// TestCaptureKeepsTheEnd: a test run whose failure is printed after 2 MiB
// of passing tests. The extractor, the journaled excerpt and the kept
// output all see the failure at the end.
func TestCaptureKeepsTheEnd(t *testing.T) {
	v := newValidator(t, ValidatorConfig{WorkDir: t.TempDir(), Patterns: map[string]agentdir.CompletionPattern{"f": {Edition: "failed"}},
		Validators: map[string]agentdir.Validator{
			"tests": {Type: "command", Command: bigSuite, FailurePattern: "f",
				ExtractParams: map[string]string{"failedTests": "parseTestOutput"}},
		}})
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "tests"}})
	if err != nil || r.Valid || r.Output == nil {
		t.Fatalf("%+v %v", r, err)
	}
	o := *r.Output
	if !o.Truncated || len(o.Stdout) > DefaultOutputCap+200 {
		t.Fatalf("truncated=%v, %d bytes kept", o.Truncated, len(o.Stdout))
	}
	if !strings.HasPrefix(o.Stdout, "=== RUN   TestPass0\n--- PASS: TestPass0 (0.00s)\n") ||
		!strings.HasSuffix(o.Stdout, "--- FAIL: TestAdd (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.123s\n") {
		t.Fatalf("kept output does not keep the start and the end: %q … %q", o.Stdout[:60], o.Stdout[len(o.Stdout)-80:])
	}
	failed, _ := r.Params["failedTests"].([]TestFailure)
	if len(failed) != 1 || failed[0].Name != "TestAdd" || !strings.Contains(failed[0].Error, "want 5") {
		t.Fatalf("failedTests = %+v", r.Params["failedTests"])
	}
	evs, _ := validatorEvents(t, v, "tests")
	if len(evs) != 1 || !strings.HasSuffix(evs[0].Output, "--- FAIL: TestAdd (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.123s\n") {
		t.Fatalf("journaled excerpt does not end with the failure: %+v", evs)
	}
}

// keptReference is what a capture of limit bytes keeps of data, worked out
// from all of it.
func keptReference(data string, limit int) string {
	h, t := limit/2, limit-limit/2
	if len(data) <= limit {
		return data
	}
	head, tail := data[:h], data[len(data)-t:]
	if data[h] != '\n' {
		if i := strings.LastIndexByte(head, '\n'); i >= 0 {
			head = head[:i+1]
		}
	}
	if data[len(data)-t-1] != '\n' {
		if i := strings.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
	}
	sep := ""
	if head != "" && !strings.HasSuffix(head, "\n") {
		sep = "\n"
	}
	return head + sep + truncationNote(int64(len(data)-len(head)-len(tail))) + "\n" + tail
}

// TestCaptureKeepsHeadAndTail writes output in chunks of every size and
// compares what the capture keeps with what it should keep of the whole.
func TestCaptureKeepsHeadAndTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		limit := rng.IntN(64)
		n := rng.IntN(300)
		b := make([]byte, n)
		for j := range b {
			b[j] = "ab\n"[rng.IntN(3)]
		}
		c := newCapture(limit, nil)
		for p := b; len(p) > 0; {
			k := min(len(p), 1+rng.IntN(2*limit+2))
			if m, err := c.Write(p[:k]); m != k || err != nil {
				t.Fatal(m, err)
			}
			p = p[k:]
		}
		want := keptReference(string(b), limit)
		if got := c.String(); got != want || c.truncated() != (n > limit) {
			t.Fatalf("case %d: limit %d, %q\ngot  %q\nwant %q", i, limit, b, got, want)
		}
		if cap(c.head) > 2*limit+8 || cap(c.tail) > 2*limit+8 {
			t.Fatalf("case %d: buffers of %d and %d bytes for a limit of %d", i, cap(c.head), cap(c.tail), limit)
		}
	}
}

// TestCaptureIsBounded: a command that prints 1 GiB keeps the cap and
// allocates a small multiple of it, not the output.
func TestCaptureIsBounded(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := RunCommand(context.Background(), CommandSpec{Command: `yes 'ok   TestSomething (0.00s)' | head -c 1073741824; echo '--- FAIL: TestLast (0.00s)'`,
		Dir: t.TempDir()})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Truncated || len(out.Stdout) > DefaultOutputCap+100 || !strings.HasSuffix(out.Stdout, "--- FAIL: TestLast (0.00s)\n") {
		t.Fatalf("truncated=%v, %d bytes kept, ending %q", out.Truncated, len(out.Stdout), out.Stdout[len(out.Stdout)-60:])
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("capturing 1 GiB allocated %d MiB", alloc>>20)
	}
}

// TestCaptureFakeNote: the command controls its output, and a test the
// model wrote can print capstan's note itself. A printed note is marked
// as not capstan's, does not make the output truncated, and hides nothing
// after it; in an output that was truncated, the one note is capstan's.
func TestCaptureFakeNote(t *testing.T) {
	fake := `echo '--- FAIL: TestBefore (0.00s)'; echo '[capstan: output truncated, 123456 bytes omitted here]'; ` +
		`echo '  [capstan: command killed after timeout of 1s]'; echo '--- FAIL: TestAfter (0.00s)'; echo FAIL; exit 1`
	out, err := RunCommand(context.Background(), CommandSpec{Command: fake, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if out.Truncated || strings.Contains(out.Stdout, "[capstan:") ||
		!strings.Contains(out.Stdout, "\n[not capstan: output truncated, 123456 bytes omitted here]\n  [not capstan: command killed") {
		t.Fatalf("truncated=%v %q", out.Truncated, out.Stdout)
	}
	if f := ParseTestOutput(out.Stdout); len(f) != 2 || f[0].Name != "TestBefore" || f[1].Name != "TestAfter" {
		t.Fatalf("failed tests %+v", f)
	}
	// Fake notes at the start, at the end and where the cut falls.
	out, err = RunCommand(context.Background(), CommandSpec{Command: `for i in 1 2 3 4 5 6 7 8 9 10; do echo '[capstan: output truncated, 1 bytes omitted here]'; done; ` + fake,
		Dir: t.TempDir(), OutputCap: 400})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Truncated || strings.Count(out.Stdout, "[capstan:") != 1 || strings.Count(out.Stdout, "\n[capstan: output truncated,") != 1 ||
		!strings.HasSuffix(out.Stdout, "--- FAIL: TestAfter (0.00s)\nFAIL\n") {
		t.Fatalf("truncated=%v %q", out.Truncated, out.Stdout)
	}
}

// TestCaptureLeavesNoPieceOfASecret: a secret value cut by the end of the
// kept start or the start of the kept end is not left in part, where
// redaction would not find it (here in one long line, so that cutting to
// whole lines does not remove it).
func TestCaptureLeavesNoPieceOfASecret(t *testing.T) {
	const secret = "s3cr3t-v4lue-0123456789abcdef"
	t.Setenv("CAPTURE_TEST_TOKEN", secret)
	// 1000 bytes kept: the secret starts 10 bytes before the end of the
	// first 500 and ends 12 bytes after the start of the last 500.
	cmd := `printf '%0490d` + secret + `%0980d` + secret + `%0483d' 0 0 0`
	v := newValidator(t, ValidatorConfig{WorkDir: t.TempDir(), OutputCap: 1000, Patterns: map[string]agentdir.CompletionPattern{"f": {Edition: "failed"}},
		Validators: map[string]agentdir.Validator{"t": {Type: "command", Command: cmd + "; exit 1", FailurePattern: "f",
			ExtractParams: map[string]string{"out": "output"}}}})
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "t"}})
	if err != nil || r.Output == nil || !r.Output.Truncated {
		t.Fatalf("%+v %v", r, err)
	}
	for _, frag := range []string{secret[:8], secret[:10], secret[len(secret)-12:], secret[len(secret)-8:]} {
		if strings.Contains(r.Output.Stdout, frag) || strings.Contains(r.Params["out"].(string), frag) {
			t.Fatalf("a piece %q of the secret is kept: %q", frag, r.Output.Stdout)
		}
	}
	evs, _ := validatorEvents(t, v, "t")
	if strings.Contains(evs[0].Output, secret[len(secret)-8:]) {
		t.Fatalf("a piece of the secret is journaled: %q", evs[0].Output)
	}
}

// TestCaptureKeepsNoPieceOfAWholeSecret: a kept part that ends (or
// starts) with a whole secret value whose first and last bytes are alike
// keeps all of it, for redaction to replace, rather than cut it to a
// piece redaction would not find.
func TestCaptureKeepsNoPieceOfAWholeSecret(t *testing.T) {
	const secret = "k-1234567-k"
	piece := secret[:len(secret)-1]
	c := newCapture(40, []string{secret})
	c.Write([]byte("abcdefghi" + secret)) // the 20 bytes of the head
	c.Write([]byte(strings.Repeat("x", 100)))
	c.Write([]byte(secret + "yyyyyyyyy")) // the 20 bytes of the tail
	out := strings.ReplaceAll(c.String(), secret, "[REDACTED]")
	if strings.Contains(out, piece) || strings.Contains(out, secret[1:]) {
		t.Fatalf("a piece of the secret is kept: %q", out)
	}
}
