package agentdir

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadTar feeds arbitrary bytes to the reader of stored snapshots: it
// must never panic, and whatever it accepts stays within the bounds of a
// snapshot and reads back through the file system it returns.
func FuzzReadTar(f *testing.F) {
	dir, runDir := f.TempDir(), f.TempDir()
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"version": "1.0.0", "name": "a", "description": "d", "runner": {}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "steps_registry.json"), []byte(`{}`), 0o644)
	os.MkdirAll(filepath.Join(dir, "prompts", "steps"), 0o755)
	os.WriteFile(filepath.Join(dir, "prompts", "steps", "p.md"), []byte("hi"), 0o644)
	s, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil {
		f.Fatal(err)
	}
	p, err := s.Save(runDir)
	if err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(p)
	f.Add(seed)
	f.Add([]byte{})
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readTar(bytes.NewReader(data), dir)
		if err != nil {
			return
		}
		if len(got.list) > MaxFiles || got.size > MaxTotalBytes {
			t.Fatalf("bounds exceeded: %d files, %d bytes", len(got.list), got.size)
		}
		for _, fl := range got.list {
			b, err := got.ReadFile(fl.Path)
			if err != nil || int64(len(b)) != fl.Size {
				t.Fatalf("%s: %v", fl.Path, err)
			}
		}
	})
}
