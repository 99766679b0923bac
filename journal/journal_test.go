package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	w.Append(RunStart, map[string]string{"agent": "a<b>&c"})
	w.SetPosition(1, "initial.work")
	w.Append(PromptResolved, map[string]string{"text": "line1\nline2"})
	w.Append(Warning, func() {}) // cannot be marshalled: recorded, not dropped
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	ev, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 3 {
		t.Fatalf("got %d events", len(ev))
	}
	if ev[0].Seq != 1 || ev[2].Seq != 3 || ev[1].Iteration != 1 || ev[1].Step != "initial.work" || ev[0].Iteration != 0 {
		t.Fatalf("bad stamps: %+v", ev)
	}
	if !strings.Contains(string(ev[0].Data), "a<b>&c") {
		t.Fatalf("HTML-escaped data: %s", ev[0].Data)
	}
	if !strings.Contains(string(ev[2].Data), "marshal_error") {
		t.Fatalf("unmarshalable data: %s", ev[2].Data)
	}
}

func TestOddStringsRoundTrip(t *testing.T) {
	w, _ := Create(t.TempDir(), "r")
	odd := []string{"quote\"back\\slash", "tab\tnew\nline", "ünïcode ✓", "bad\xffutf8", "<html>&"}
	for _, s := range odd {
		w.SetPosition(3, s)
		w.Append(s, nil)
	}
	w.Close()
	ev, err := ReadFile(w.Path())
	if err != nil || len(ev) != len(odd) {
		t.Fatalf("%v %d", err, len(ev))
	}
	for i, s := range odd {
		want := strings.ToValidUTF8(s, "\uFFFD")
		if ev[i].Type != want || ev[i].Step != want {
			t.Fatalf("%q came back as %q / %q", s, ev[i].Type, ev[i].Step)
		}
	}
}

func TestCreateIgnoresJournalsInGit(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, err := os.ReadFile(filepath.Join(dir, ".capstan", ".gitignore"))
	if err != nil || !strings.Contains(string(b), "\n*\n") {
		t.Fatalf(".gitignore = %q, %v", b, err)
	}
	// A user's own .gitignore there is left alone.
	os.WriteFile(filepath.Join(dir, ".capstan", ".gitignore"), []byte("mine\n"), 0o644)
	w2, _ := Create(dir, "r2")
	w2.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, ".capstan", ".gitignore")); string(b) != "mine\n" {
		t.Fatalf("overwrote .gitignore: %q", b)
	}
}

func TestCreateRefusesExistingRun(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := Create(dir, "r1"); err == nil {
		t.Fatal("overwrote an existing journal")
	}
}

func TestAppendContinuesSequence(t *testing.T) {
	dir := t.TempDir()
	w, _ := Create(dir, "r1")
	w.Append(RunStart, nil)
	w.Append(RunEnd, nil)
	w.Close()
	w2, err := Append(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	w2.Append(RunStart, nil)
	w2.Close()
	ev, _ := ReadFile(w.Path())
	if len(ev) != 3 || ev[2].Seq != 3 {
		t.Fatalf("%+v", ev)
	}
}

func TestConcurrentEmitKeepsLinesWhole(t *testing.T) {
	dir := t.TempDir()
	w, _ := Create(dir, "r1")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				w.Append(ToolCall, map[string]string{"output": strings.Repeat("x", 500)})
			}
		}()
	}
	wg.Wait()
	w.Close()
	ev, err := ReadFile(w.Path())
	if err != nil || len(ev) != 800 {
		t.Fatalf("%v %d", err, len(ev))
	}
	for i, e := range ev {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", e.Seq, i)
		}
	}
}

func TestListLegacyDir(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"20260101T000000Z-aaaaaa", "20260102T000000Z-bbbbbb"} {
		w, _ := Create(dir, id)
		w.Close()
	}
	runs, err := List(dir)
	if err != nil || len(runs) != 2 || runs[0].ID != "20260102T000000Z-bbbbbb" || !runs[0].Legacy {
		t.Fatalf("%v %+v", err, runs)
	}
	if runs, err := List(t.TempDir()); err != nil || runs != nil {
		t.Fatalf("empty dir: %v %v", runs, err)
	}
}

func TestNewRunIDIsSortableAndUnique(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	a, b := NewRunID(now), NewRunID(now)
	if a == b || !strings.HasPrefix(a, "20261121T100000Z-") {
		t.Fatalf("%s %s", a, b)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"seq":1,"time":"2026-01-01T00:00:00Z","type":"run.start","data":{"a":1}}` + "\n"))
	f.Add([]byte("\n\n{\"seq\":"))
	f.Add([]byte{0xff, '\n', '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, in, err := Read(bytes.NewReader(b), "fuzz")
		if err != nil {
			t.Fatalf("an in-memory read failed: %v", err)
		}
		if in.Size > int64(len(b)) || len(ev) > in.Lines {
			t.Fatalf("size %d of %d bytes, %d events of %d lines", in.Size, len(b), len(ev), in.Lines)
		}
	})
}
