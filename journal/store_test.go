package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateDirPrecedence(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		env  func(string) string
		want string
	}{
		{env(EnvStateDir, "/s", "XDG_STATE_HOME", "/x", "HOME", "/h"), "/s"},
		{env("XDG_STATE_HOME", "/x", "HOME", "/h"), "/x/capstan"},
		{env("XDG_STATE_HOME", "relative", "HOME", "/h"), "/h/.local/state/capstan"},
		{env("HOME", "/h"), "/h/.local/state/capstan"},
	} {
		if got, err := StateDir(c.env); err != nil || got != c.want {
			t.Errorf("got %q %v, want %q", got, err, c.want)
		}
	}
}

func TestStoreKeepsRunsOutsideTheWorkDirAndFindsThemFromAnywhere(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	wdA, wdB := t.TempDir(), t.TempDir()
	for _, c := range []struct{ wd, id string }{{wdA, "20260101T000000Z-aaaaaa"}, {wdB, "20260102T000000Z-bbbbbb"}, {wdA, "20260103T000000Z-cccccc"}} {
		w, err := s.Create(c.wd, c.id)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		if strings.HasPrefix(w.Path(), c.wd) || !strings.HasPrefix(w.Path(), s.Dir) {
			t.Fatalf("journal %s is not in the state dir", w.Path())
		}
	}
	if st, err := os.Stat(filepath.Join(s.Dir, "runs")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("runs folder: %v %v", st.Mode(), err)
	}
	// An older capstan's run under wdA/.capstan/runs.
	old, _ := Create(wdA, "20251231T000000Z-dddddd")
	old.Close()

	runs, err := s.List(wdA)
	if err != nil || len(runs) != 3 || runs[0].ID != "20260103T000000Z-cccccc" || runs[2].ID != "20251231T000000Z-dddddd" || !runs[2].Legacy || runs[0].Legacy {
		t.Fatalf("%v %+v", err, runs)
	}
	if runs[0].WorkDir != wdA {
		t.Fatalf("work dir %q", runs[0].WorkDir)
	}
	all, err := s.ListAll()
	if err != nil || len(all) != 3 {
		t.Fatalf("%v %+v", err, all)
	}
	// From another directory: found by id or unique prefix.
	r, err := s.Find(t.TempDir(), "20260102")
	if err != nil || r.WorkDir != wdB || r.ID != "20260102T000000Z-bbbbbb" {
		t.Fatalf("%v %+v", err, r)
	}
	if _, err := s.Find("", "2026"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	var nr *NoRunError
	if _, err := s.Find(t.TempDir(), "20251231"); !errors.As(err, &nr) || nr.ID != "20251231" || len(nr.Searched) != 2 || len(nr.Matches) != 0 {
		t.Fatalf("legacy run found outside its work dir, or not said where capstan looked: %v", err)
	}
	if r, err := s.Find(wdA, "20251231"); err != nil || !r.Legacy {
		t.Fatalf("legacy run: %v %+v", err, r)
	}
	for _, bad := range []string{"", "../x", "a/b", ".."} {
		if _, err := s.Create(wdA, bad); err == nil {
			t.Fatalf("run id %q accepted", bad)
		}
	}
}

func TestWorkDirKeysDiffer(t *testing.T) {
	s := Store{Dir: "/state"}
	a, _ := s.WorkDirRuns("/p/one/app")
	b, _ := s.WorkDirRuns("/p/two/app")
	if a == b || !strings.HasPrefix(filepath.Base(a), "app-") {
		t.Fatalf("%s %s", a, b)
	}
	if c, _ := s.WorkDirRuns("/"); !strings.HasPrefix(c, "/state/runs/") {
		t.Fatalf("root work dir: %s", c)
	}
}

// A run journaled in the store with a copy under the work dir (pipeline
// run --journal-dir .) is listed once and found, by id or prefix, in the
// store: the copy is within the agent's reach.
func TestStoreRunWinsOverItsCopy(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	wd := t.TempDir()
	const id = "20260101T000000Z-aaaaaa"
	for _, create := range []func() (*Writer, error){
		func() (*Writer, error) { return s.Create(wd, id) },
		func() (*Writer, error) { return Create(wd, id) },
	} {
		w, err := create()
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	runs, err := s.List(wd)
	if err != nil || len(runs) != 1 || runs[0].Legacy || !strings.HasPrefix(runs[0].Path, s.Dir) {
		t.Fatalf("%v %+v", err, runs)
	}
	for _, q := range []string{id, "20260101"} {
		if r, err := s.Find(wd, q); err != nil || r.Legacy || !strings.HasPrefix(r.Path, s.Dir) {
			t.Fatalf("find %s: %v %+v", q, err, r)
		}
	}
}

// A copy in a --journal-dir other than the work dir the run is kept under
// is listed with that folder's runs as the store's run, never read: the
// copy is within the agent's reach.
func TestStoreRunWinsOverItsCopyElsewhere(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	wd, jd := t.TempDir(), t.TempDir()
	const id = "20260101T000000Z-bbbbbb"
	w, err := s.Create(wd, id)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if w, err = Create(jd, id); err != nil {
		t.Fatal(err)
	}
	w.Close()
	runs, err := s.List(jd)
	if err != nil || len(runs) != 1 || runs[0].Legacy || !strings.HasPrefix(runs[0].Path, s.Dir) {
		t.Fatalf("%v %+v", err, runs)
	}
}

// A folder under the work dir whose name holds control characters (the
// agent can make one) is no run: runs would print its name raw to the
// terminal. The store never makes one.
func TestStoreSkipsRunNamesWithControls(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	wd := t.TempDir()
	name := "x\x1b[31mRED\x1b]0;title\x07"
	if err := os.MkdirAll(filepath.Join(wd, RunsDir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, RunsDir, name, FileName), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.List(wd); err != nil || len(runs) != 0 {
		t.Fatalf("%v %+v", err, runs)
	}
	if _, err := s.Find(wd, "x"); err == nil {
		t.Fatal("found a run with controls in its name")
	}
	if _, err := s.Create(wd, name); err == nil {
		t.Fatal("created a run with controls in its id")
	}
}
