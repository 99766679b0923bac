package verify

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
)

// validatorEvents runs conditions and returns the validator.result events
// they journaled, decoded, with each event's JSON.
func validatorEvents(t *testing.T, v *CompletionValidator, names ...string) ([]event.ValidatorEvent, []string) {
	t.Helper()
	rec := &recorder{}
	v.cfg.Emitter = rec
	var conds []agentdir.CompletionCondition
	for _, n := range names {
		conds = append(conds, agentdir.CompletionCondition{Validator: n})
	}
	if _, err := v.Validate(context.Background(), conds); err != nil {
		t.Fatal(err)
	}
	var evs []event.ValidatorEvent
	var raw []string
	for _, e := range rec.events {
		if e.typ != "validator.result" {
			continue
		}
		var ev event.ValidatorEvent
		if err := json.Unmarshal(e.data, &ev); err != nil {
			t.Fatal(err)
		}
		evs, raw = append(evs, ev), append(raw, string(e.data))
	}
	return evs, raw
}

// TestFailingValidatorJournalsItsOutput: git status --porcelain on a real
// repo — clean, then with an untracked file. The passing run's event is
// what it was (no output field); the failing run's carries what git
// printed.
func TestFailingValidatorJournalsItsOutput(t *testing.T) {
	dir := gitRepo(t)
	v := newValidator(t, ValidatorConfig{Validators: registryValidators(), WorkDir: dir})
	evs, raw := validatorEvents(t, v, "git-clean")
	if len(evs) != 1 || !evs[0].Valid || strings.Contains(raw[0], `"output`) {
		t.Fatalf("passing validator journaled %s", raw)
	}
	write(t, dir, "stray file.txt", "x\n")
	evs, raw = validatorEvents(t, v, "git-clean")
	if len(evs) != 1 || evs[0].Valid || evs[0].Output != "?? \"stray file.txt\"\n" || evs[0].OutputOmitted != 0 {
		t.Fatalf("failing validator journaled %s", raw)
	}
}

// TestValidatorOutputExcerptIsBounded: a validator prints 3 MB (past the
// 1 MiB cap of each stream) and ends with the line that matters; the
// event keeps the end, within the bound, from the start of a line, and
// counts what it left out.
func TestValidatorOutputExcerptIsBounded(t *testing.T) {
	v := newValidator(t, ValidatorConfig{WorkDir: t.TempDir(), Patterns: map[string]agentdir.CompletionPattern{"f": {Edition: "failed"}},
		Validators: map[string]agentdir.Validator{
			"loud": {Type: "command", Command: `yes 'ok   TestSomething (0.00s)' | head -c 3000000; echo; echo '--- FAIL: TestAdd' >&2; exit 1`,
				SuccessWhen: "exitCode:0", FailurePattern: "f"},
		}})
	rec := &recorder{}
	v.cfg.Emitter = rec
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "loud"}})
	if err != nil || r.Output == nil || len(rec.events) != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	raw := string(rec.events[0].data)
	var ev event.ValidatorEvent
	if err := json.Unmarshal(rec.events[0].data, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Output) > OutputExcerptBytes || len(raw) > OutputExcerptBytes+512 {
		t.Fatalf("excerpt %d bytes, event %d bytes", len(ev.Output), len(raw))
	}
	if !strings.HasSuffix(ev.Output, "\n--- FAIL: TestAdd\n") || !strings.HasPrefix(ev.Output, "ok   TestSomething") {
		t.Fatalf("excerpt does not keep the end from a line's start: %q … %q", ev.Output[:40], ev.Output[len(ev.Output)-40:])
	}
	// The capture keeps the end of stdout: the note of the cap is in the
	// middle of the output, not in its last 4 KiB.
	if strings.Contains(ev.Output, "[capstan: output truncated,") || !ev.Truncated || !r.Output.Truncated {
		t.Errorf("excerpt %q…, truncated=%v", ev.Output[:80], ev.Truncated)
	}
	// All of stdout as kept and stderr, joined, is the excerpt plus what
	// it left out.
	if full := len(JoinedOutput(*r.Output)); ev.OutputOmitted+len(ev.Output) != full {
		t.Errorf("omitted %d + excerpt %d != %d", ev.OutputOmitted, len(ev.Output), full)
	}
}

// TestValidatorOutputExcerptOfBinaryOutput: random bytes and control
// characters (what a model's test can print) become valid UTF-8 within
// the bound, and the event stays small once encoded.
func TestValidatorOutputExcerptOfBinaryOutput(t *testing.T) {
	dir := t.TempDir()
	ctl := make([]byte, 200000)
	for i := range ctl {
		ctl[i] = byte(i % 32) // every C0 control: each is 6 bytes in JSON
	}
	write(t, dir, "ctl.bin", string(ctl))
	v := newValidator(t, ValidatorConfig{WorkDir: dir, Patterns: map[string]agentdir.CompletionPattern{"f": {Edition: "failed"}},
		Validators: map[string]agentdir.Validator{
			"random": {Type: "command", Command: "head -c 300000 /dev/urandom; exit 1", SuccessWhen: "exitCode:0", FailurePattern: "f"},
			"ctl":    {Type: "command", Command: "cat ctl.bin; exit 1", SuccessWhen: "exitCode:0", FailurePattern: "f"},
		}})
	for _, name := range []string{"random", "ctl"} {
		evs, raw := validatorEvents(t, v, name)
		ev := evs[0]
		if !utf8.ValidString(ev.Output) || len(ev.Output) > OutputExcerptBytes || ev.Output == "" {
			t.Errorf("%s: excerpt of %d bytes, valid UTF-8 %v", name, len(ev.Output), utf8.ValidString(ev.Output))
		}
		if len(raw[0]) > 6*OutputExcerptBytes+512 {
			t.Errorf("%s: event of %d bytes", name, len(raw[0]))
		}
	}
}

// echoFile is a custom validator that fails and reports a file's content
// as its output, as a validator written in Go may.
type echoFile struct{}

func (echoFile) Validate(_ context.Context, req CustomRequest) (CustomResult, error) {
	b, err := os.ReadFile(filepath.Join(req.WorkDir, "report.txt"))
	return CustomResult{Output: event.ValidatorOutput{Stdout: string(b), ExitCode: 1}}, err
}

// TestValidatorOutputExcerptRedactsSecrets: a key a command validator is
// given on purpose, and a key in what a custom validator reports (which
// capstan does not redact on the way in), reach the event as [REDACTED]
// — also when the key straddles where the excerpt begins, so that no
// part of it survives the cut.
func TestValidatorOutputExcerptRedactsSecrets(t *testing.T) {
	const key = "xk-excerpt-0123456789-secret-value"
	t.Setenv("EXCERPT_TEST_API_KEY", key)
	dir := t.TempDir()
	// The key ends 10 bytes into the last OutputExcerptBytes bytes.
	write(t, dir, "report.txt", strings.Repeat("a", 10000)+key+strings.Repeat("b", OutputExcerptBytes-10))
	v := newValidator(t, ValidatorConfig{WorkDir: dir, Env: []string{"EXCERPT_TEST_API_KEY"},
		Patterns: map[string]agentdir.CompletionPattern{"f": {Edition: "failed"}},
		Custom:   map[string]CustomValidator{"echo": echoFile{}},
		Validators: map[string]agentdir.Validator{
			"cmd":    {Type: "command", Command: `echo "connecting with $EXCERPT_TEST_API_KEY"; exit 1`, SuccessWhen: "exitCode:0", FailurePattern: "f"},
			"custom": {Type: "custom", Handler: "echo", FailurePattern: "f"},
		}})
	for _, name := range []string{"cmd", "custom"} {
		_, raw := validatorEvents(t, v, name)
		for n := 8; n <= len(key); n++ {
			if strings.Contains(raw[0], key[len(key)-n:]) || strings.Contains(raw[0], key[:n]) {
				t.Fatalf("%s: the event holds part of the key: %s", name, raw[0][:min(len(raw[0]), 300)])
			}
		}
	}
	evs, _ := validatorEvents(t, v, "cmd")
	if evs[0].Output != "connecting with [REDACTED]\n" {
		t.Errorf("output = %q", evs[0].Output)
	}
}
