//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// RemoveStale removes what killed runs left in the temporary directory —
// a cache whose owner is gone, a copy of it, a command's HOME, a directory
// of an older capstan over a day old — and keeps what a live process owns,
// a recent directory without an owner, a symbolic link and a directory
// whose owner file capstan did not write.
func TestRemoveStaleRemovesOnlyWhatKilledRunsLeft(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name, owner string) string {
		t.Helper()
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "go-build", "00"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "go-build", "00", "entry"), []byte("x"), 0o400); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	// A process that no longer runs (no pid is that large), and this
	// process with another start time (a reused pid).
	gone := mk("capstan-cache-111", "999999999 12345")
	reused := mk("capstan-cache-run-222", processIdentity(os.Getpid())+"0")
	sbx := mk("capstan-sbx-333", "999999999 1")
	old := mk("capstan-cache-444", "")
	if err := os.Chtimes(old, time.Now().Add(-48*time.Hour), time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	live := mk("capstan-cache-555", processIdentity(os.Getpid()))
	recent := mk("capstan-sbx-666", "")
	foreign := mk("capstan-sbx-777", "not capstan's")
	other := mk("someone-else-888", "999999999 1")
	target := mk("target", "999999999 1")
	if err := os.Symlink(target, filepath.Join(tmp, "capstan-cache-999")); err != nil {
		t.Fatal(err)
	}
	if n := RemoveStale(tmp); n != 4 {
		t.Errorf("removed %d directories, want 4", n)
	}
	for _, d := range []string{gone, reused, sbx, old} {
		if _, err := os.Lstat(d); err == nil {
			t.Errorf("%s is left over, but was kept", filepath.Base(d))
		}
	}
	for _, d := range []string{live, recent, foreign, other, target, filepath.Join(tmp, "capstan-cache-999")} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(d), err)
		}
	}
}

// A cache names its owner, this process, so that no later run removes it
// while it is in use.
func TestNewCacheIsOwned(t *testing.T) {
	c, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	b, err := os.ReadFile(filepath.Join(c.Dir(), ownerFile))
	if err != nil || string(b) != processIdentity(os.Getpid())+"\n" {
		t.Fatalf("owner file %q %v", b, err)
	}
	if n := RemoveStale(filepath.Dir(c.Dir())); n != 0 {
		t.Fatalf("a live run's cache was removed")
	}
}
