//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
)

// TestModelCannotReachTheRunRecord plays the model as an attacker against
// the run's record in the state directory — the journal (with its
// tests.baseline), the pinned definition snapshot — from a sandboxed Bash
// and the file tools, knowing the record's exact path (the worst case: a
// state directory handed to commands on purpose through
// runner.boundaries.env). Reads, appends, replacements, symbolic links in
// the work dir, relative paths and /proc all fail, and the record is
// byte for byte what capstan wrote.
func TestModelCannotReachTheRunRecord(t *testing.T) {
	base := t.TempDir()
	state, work := filepath.Join(base, "state"), filepath.Join(base, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := journal.Store{Dir: state}.Create(work, "r1")
	if err != nil {
		t.Fatal(err)
	}
	w.Append(journal.RunStart, map[string]any{"agent": "a"})
	w.Append("tests.baseline", map[string]any{"validator": "tests", "marker": "BASELINE-SECRET-MARKER"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Dir(w.Path())
	snapshot := filepath.Join(runDir, "definition-0123456789abcdef.tar")
	if err := os.WriteFile(snapshot, []byte("pinned definition"), 0o400); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, p := range []string{w.Path(), snapshot} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = b
	}
	rel, err := filepath.Rel(work, w.Path())
	if err != nil {
		t.Fatal(err)
	}

	tools, err := builtin.New(builtin.Config{WorkDir: work, Runner: &CommandRunner{Runner: sharedRunner(t)},
		Env: []string{journal.EnvStateDir + "=" + state}})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tool.Tool{}
	for _, tl := range tools {
		byName[tl.Spec().Name] = tl
	}
	run := func(name string, input map[string]any) string {
		t.Helper()
		raw, _ := json.Marshal(input)
		res, err := byName[name].Run(context.Background(), raw)
		if err != nil {
			return err.Error()
		}
		return res.Content
	}
	forged := `{"seq":3,"time":"2026-11-25T00:00:00Z","type":"tests.baseline","data":{"validator":"tests"}}`
	for _, cmd := range []string{
		`cat "$CAPSTAN_STATE_DIR"/runs/*/r1/events.jsonl`,
		`cat ` + w.Path(),
		`cat ` + rel,
		`echo '` + forged + `' >> ` + w.Path(),
		`echo '` + forged + `' > ` + w.Path() + `.new && mv ` + w.Path() + `.new ` + w.Path(),
		`rm -f ` + w.Path() + `; cp /dev/null ` + snapshot,
		`ln -s ` + runDir + ` rec && cat rec/events.jsonl; echo '` + forged + `' >> rec/events.jsonl`,
		`ln -s ` + w.Path() + ` ev && cat ev; echo x >> ev`,
		`cat /proc/$PPID/cwd/` + rel + `; ls /proc/self/fd; cat /proc/1/environ`,
		`find / -name events.jsonl 2>/dev/null | xargs -r cat`,
	} {
		out := run(builtin.NameBash, map[string]any{"command": cmd})
		if strings.Contains(out, "BASELINE-SECRET-MARKER") {
			t.Errorf("Bash read the journal with %q:\n%s", cmd, out)
		}
	}
	// The file tools (in capstan's process, never sandboxed) through the
	// links the model left in the work dir.
	for _, call := range []struct {
		name  string
		input map[string]any
	}{
		{builtin.NameRead, map[string]any{"file_path": "rec/events.jsonl"}},
		{builtin.NameRead, map[string]any{"file_path": "ev"}},
		{builtin.NameRead, map[string]any{"file_path": w.Path()}},
		{builtin.NameRead, map[string]any{"file_path": rel}},
		{builtin.NameWrite, map[string]any{"file_path": "rec/events.jsonl", "content": forged + "\n"}},
		{builtin.NameWrite, map[string]any{"file_path": "ev", "content": forged + "\n"}},
	} {
		if out := run(call.name, call.input); strings.Contains(out, "BASELINE-SECRET-MARKER") {
			t.Errorf("%s %v read the journal:\n%s", call.name, call.input, out)
		}
	}
	for p, want := range before {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s changed: %q %v", filepath.Base(p), got, err)
		}
	}
	if _, in, err := journal.ReadChecked(w.Path()); err != nil || in.Err() != nil {
		t.Errorf("journal: %v %v", err, in.Err())
	}

	// The control: unsandboxed, Bash runs with the user's rights and the
	// first attack reads the record (the journal's chain, and the writer's
	// check of its file, are then what show tampering; see docs/tools.md).
	open, err := builtin.New(builtin.Config{WorkDir: work, Env: []string{journal.EnvStateDir + "=" + state}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range open {
		if tl.Spec().Name == builtin.NameBash {
			res, err := tl.Run(context.Background(), json.RawMessage(`{"command":"cat \"$CAPSTAN_STATE_DIR\"/runs/*/r1/events.jsonl"}`))
			if err != nil || !strings.Contains(res.Content, "BASELINE-SECRET-MARKER") {
				t.Errorf("control: unsandboxed Bash did not read the journal: %v %+v", err, res)
			}
		}
	}
}
