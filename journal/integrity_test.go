package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// writeRun writes n events to a new store journal and returns its path.
func writeRun(t *testing.T, n int) string {
	t.Helper()
	w, err := Store{Dir: t.TempDir()}.Create(t.TempDir(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		w.Append(ToolCall, map[string]any{"i": i, "output": strings.Repeat("y", 100)})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

func mustRead(t *testing.T, path string) ([]Event, Integrity) {
	t.Helper()
	ev, in, err := ReadChecked(path)
	if err != nil {
		t.Fatal(err)
	}
	return ev, in
}

func TestChainHoldsForWrittenAndAppendedEvents(t *testing.T) {
	path := writeRun(t, 3)
	w, err := Append(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(RunEnd, nil)
	w.Close()
	ev, in := mustRead(t, path)
	if len(ev) != 4 || in.Err() != nil || in.Unchained != 0 || len(in.Notes()) != 0 {
		t.Fatalf("%d events, %+v", len(ev), in)
	}
	if ev[0].Prev != Genesis || ev[3].Prev == "" {
		t.Fatalf("prev fields: %q %q", ev[0].Prev, ev[3].Prev)
	}
}

func TestChainReportsEditsInsertionsAndDeletions(t *testing.T) {
	path := writeRun(t, 4)
	orig, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(orig, []byte("\n"))
	cases := map[string][]byte{
		"edit":   bytes.Replace(orig, []byte(`"i":2`), []byte(`"i":9`), 1),
		"delete": bytes.Join([][]byte{lines[0], lines[2], lines[3]}, nil),
		"insert": bytes.Join([][]byte{lines[0], lines[1], lines[1], lines[2], lines[3]}, nil),
		"strip":  bytes.ReplaceAll(orig, []byte(`"prev":"`), []byte(`"note":"`)),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, body, 0o600); err != nil {
				t.Fatal(err)
			}
			_, in := mustRead(t, path)
			if !errors.Is(in.Err(), ErrBrokenChain) || len(in.Notes()) == 0 {
				t.Fatalf("%s not detected: %+v", name, in)
			}
			if _, err := Append(path); !errors.Is(err, ErrBrokenChain) {
				t.Fatalf("appended to a broken journal: %v", err)
			}
		})
	}
}

func TestUnchainedEventsAreAcceptedOnlyInLegacyLocation(t *testing.T) {
	old := `{"seq":1,"time":"2026-01-01T00:00:00Z","type":"run.start"}` + "\n" +
		`{"seq":2,"time":"2026-01-01T00:00:01Z","type":"iteration.start","iteration":1}` + "\n"
	legacy := filepath.Join(t.TempDir(), RunsDir, "r1", FileName)
	os.MkdirAll(filepath.Dir(legacy), 0o755)
	os.WriteFile(legacy, []byte(old), 0o644)
	if _, in := mustRead(t, legacy); in.Err() != nil || in.Unchained != 2 {
		t.Fatalf("legacy journal: %+v", in)
	}
	// Resuming it chains the new events onto the old ones.
	w, err := Append(legacy)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(RunStart, nil)
	w.Close()
	if ev, in := mustRead(t, legacy); in.Err() != nil || len(ev) != 3 || ev[2].Prev == "" {
		t.Fatalf("resumed legacy journal: %+v %+v", in, ev)
	}
	state := filepath.Join(t.TempDir(), "runs", "wd-1", "r1", FileName)
	os.MkdirAll(filepath.Dir(state), 0o700)
	os.WriteFile(state, []byte(old), 0o600)
	if _, in := mustRead(t, state); !errors.Is(in.Err(), ErrBrokenChain) {
		t.Fatalf("an unchained journal in the state dir passed: %+v", in)
	}
}

func TestTornTailIsReportedAndRepairedIntoSideFile(t *testing.T) {
	path := writeRun(t, 2)
	torn := []byte(`{"seq":3,"time":"2026-01-01T00:00:00Z","type":"model.turn","prev":"abc","data":{"text":"` + strings.Repeat("z", 5000))
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(torn)
	f.Close()
	ev, in := mustRead(t, path)
	if len(ev) != 2 || in.TornTail == nil || in.TornTail.Bytes != len(torn) || in.Err() != nil {
		t.Fatalf("torn tail: %d events %+v", len(ev), in)
	}
	if notes := in.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "cut short") {
		t.Fatalf("notes %q", notes)
	}
	w, err := Append(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(RunEnd, nil)
	w.Close()
	side, err := os.ReadFile(path + TornSuffix)
	if err != nil || !bytes.Equal(side, append(torn, '\n')) {
		t.Fatalf("side file kept %d bytes (%v), want %d", len(side), err, len(torn)+1)
	}
	ev, in = mustRead(t, path)
	if in.Err() != nil || in.TornTail != nil || len(in.Damaged) != 0 || len(ev) != 4 {
		t.Fatalf("after repair: %d events %+v", len(ev), in)
	}
	if ev[2].Type != Repaired || ev[2].Seq != 3 || !strings.Contains(string(ev[2].Data), `"bytes":5`) || ev[3].Seq != 4 {
		t.Fatalf("repair event: %+v", ev[2:])
	}
	// A second repair appends to the same side file.
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte(`{"seq":5`))
	f.Close()
	w, err = Append(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if side, _ := os.ReadFile(path + TornSuffix); !bytes.HasSuffix(side, []byte("\n{\"seq\":5\n")) {
		t.Fatalf("second cut: %q", side[len(side)-20:])
	}
}

// A journal that an older capstan resumed after a torn write has the torn
// bytes and the next whole event on one line: the event is recovered.
func TestOldTornThenAppendedLineIsRecovered(t *testing.T) {
	good := `{"seq":1,"time":"2026-01-01T00:00:00Z","type":"run.start"}` + "\n"
	poisoned := `{"seq":2,"time":"2026-01-01T00:0` + `{"seq":2,"time":"2026-01-01T00:00:05Z","type":"run.start","data":{"resumed":true}}` + "\n"
	ev, in, err := Read(strings.NewReader(good+poisoned+good), "j")
	if err != nil || len(ev) != 3 || ev[1].Type != RunStart || in.Err() != nil {
		t.Fatalf("%v %d %+v", err, len(ev), in)
	}
	if len(in.Damaged) != 1 || !in.Damaged[0].Recovered || in.Damaged[0].Line != 2 || in.Damaged[0].Bytes != 32 {
		t.Fatalf("damage: %+v", in.Damaged)
	}
	// A line with no whole event in it is skipped and makes the journal
	// unfit to continue.
	ev, in, err = Read(strings.NewReader(good+"garbage\n"+good), "j")
	if err != nil || len(ev) != 2 || !errors.Is(in.Err(), ErrDamaged) || !strings.Contains(in.Err().Error(), "line 2") {
		t.Fatalf("%v %d %v", err, len(ev), in.Err())
	}
}

func TestEmptyJournalReadsAsNoEvents(t *testing.T) {
	path := writeRun(t, 0)
	ev, in := mustRead(t, path)
	if len(ev) != 0 || in.Err() != nil || in.Size != 0 {
		t.Fatalf("%d %+v", len(ev), in)
	}
	w, err := Append(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(RunStart, nil)
	w.Close()
	if ev, in := mustRead(t, path); len(ev) != 1 || ev[0].Prev != Genesis || in.Err() != nil {
		t.Fatalf("%+v %+v", ev, in)
	}
}

// forge rewrites a journal the way a model with the user's rights can:
// the given lines, each chained to the one before, so the file alone
// reads as a clean record.
func forge(t *testing.T, lines ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	prev := Genesis
	for i, typ := range lines {
		line := `{"seq":` + strconv.Itoa(i+1) + `,"time":"2026-11-25T00:00:00Z","type":"` + typ + `","prev":"` + prev + `"}`
		b.WriteString(line + "\n")
		prev = LineHash([]byte(line))
	}
	return b.Bytes()
}

// A process that replaces the journal while the run writes it (a model's
// unsandboxed Bash: `mv forged events.jsonl`, or rm) leaves the writer's
// descriptor on the old file. The writer notices the swap at its next
// event, appends its events to the file now at the path — whose chain then
// breaks where they start, so readers and resume refuse the record — and
// reports the swap.
func TestWriterNoticesItsJournalWasReplaced(t *testing.T) {
	for _, swap := range []string{"rename", "remove"} {
		t.Run(swap, func(t *testing.T) {
			w, err := Store{Dir: t.TempDir()}.Create(t.TempDir(), "r1")
			if err != nil {
				t.Fatal(err)
			}
			w.Append(RunStart, map[string]any{"agent": "a"})
			w.Append(ToolCall, map[string]any{"name": "Bash"})
			if swap == "rename" {
				tmp := w.Path() + ".forged"
				if err := os.WriteFile(tmp, forge(t, RunStart, "tests.baseline", IterationStart, IterationEnd), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, w.Path()); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Remove(w.Path()); err != nil {
				t.Fatal(err)
			}
			w.Append(ToolCall, map[string]any{"name": "Bash", "output": "after the swap"})
			err = w.Close()
			if err == nil || !strings.Contains(err.Error(), "replaced or removed") {
				t.Errorf("Close = %v, want the swap reported", err)
			}
			events, in := mustRead(t, w.Path())
			if !errors.Is(in.Err(), ErrBrokenChain) {
				t.Fatalf("the swapped journal reads as intact (%d events): %v", len(events), in.Err())
			}
			if _, err := Append(w.Path()); err == nil {
				t.Error("Append continued a swapped journal")
			}
		})
	}
}

// A symbolic link put at the journal's path is not followed: the writer
// keeps its events in the file it had, appends nothing to the file the
// link names, and reports the swap.
func TestWriterDoesNotFollowALinkOverItsJournal(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	w, err := Store{Dir: t.TempDir()}.Create(t.TempDir(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	w.Append(RunStart, map[string]any{"agent": "a"})
	victim := filepath.Join(t.TempDir(), "profile")
	if err := os.WriteFile(victim, []byte("export A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(w.Path()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, w.Path()); err != nil {
		t.Fatal(err)
	}
	w.Append(ToolCall, map[string]any{"name": "Bash", "output": "after the swap"})
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "replaced or removed") {
		t.Errorf("Close = %v, want the swap reported", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "export A=1\n" {
		t.Fatalf("the file the link names was written: %q %v", b, err)
	}
}

// A journal renamed away (or linked elsewhere) keeps a name, so its open
// descriptor still counts one link; the writer finds the file put at the
// path by looking the path up at the next position change, appends there
// so the forged record's chain breaks, and reports the swap. Without a
// later position change, Close still reports it.
func TestWriterNoticesItsJournalWasMovedAway(t *testing.T) {
	for _, move := range []string{"rename", "link"} {
		for _, notice := range []string{"position", "close"} {
			t.Run(move+"/"+notice, func(t *testing.T) {
				w, err := Store{Dir: t.TempDir()}.Create(t.TempDir(), "r1")
				if err != nil {
					t.Fatal(err)
				}
				w.SetPosition(1, "initial")
				w.Append(RunStart, map[string]any{"agent": "a"})
				kept := w.Path() + ".kept"
				if move == "rename" {
					err = os.Rename(w.Path(), kept)
				} else if err = os.Link(w.Path(), kept); err == nil {
					err = os.Remove(w.Path())
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(w.Path(), forge(t, RunStart, IterationStart, IterationEnd, RunEnd), 0o600); err != nil {
					t.Fatal(err)
				}
				if notice == "position" {
					w.SetPosition(2, "initial")
					w.Append(IterationStart, nil)
				}
				if err := w.Close(); err == nil || !strings.Contains(err.Error(), "replaced or removed") {
					t.Errorf("Close = %v, want the swap reported", err)
				}
				if notice == "position" {
					if _, in := mustRead(t, w.Path()); !errors.Is(in.Err(), ErrBrokenChain) {
						t.Fatalf("the forged journal reads as intact: %v", in.Err())
					}
				}
			})
		}
	}
}
