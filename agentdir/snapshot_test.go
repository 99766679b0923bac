package agentdir

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agenterr"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// agentFiles is an agent with every kind of definition file, plus files
// that are not part of the definition.
var agentFiles = map[string]string{
	"agent.json": `{"version": "1.0.0", "name": "a", "description": "d",
  "runner": {"model": "script:s/one.yaml", "systemPromptPath": "sys.md", "skills": ["skills"],
    "prompts": {"registry": "reg.json", "fallbackDir": "fb"},
    "completion": {"type": "keyword", "keyword": "X"}}}`,
	"reg.json":                        `{"entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "a", "c3": "b", "model": "script:two.yaml", "fallback": "../shared/generic.md"}}}`,
	"shared/generic.md":               "a step's fallback prompt",
	"shared/unused.md":                "not part of the definition",
	"prompts/steps/a/b/f_default.md":  "step",
	"fb/f_default.md":                 "fallback",
	"sys.md":                          "system",
	"schemas/out.schema.json":         `{"type": "object"}`,
	"s/one.yaml":                      "turns: []",
	"two.yaml":                        "turns: []",
	"skills/x/SKILL.md":               "---\nname: x\ndescription: y\n---\nbody",
	"skills/x/scripts/run.sh":         "echo",
	"notes.txt":                       "not part of the definition",
	"prompts/.git/HEAD":               "ignored",
	"three.yaml":                      "turns: []",
	"steps_registry.json":             "{}",
	"prompts/steps/a/b/f_other.md":    "also a prompt",
	"schemas/nested/more.schema.json": `{}`,
}

func TestTakeReadsEveryDefinitionFileAndNothingElse(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, agentFiles)
	s, err := TakeSnapshot(dir, SnapshotOptions{Models: []string{"script:three.yaml", "anthropic:x"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.Files() {
		got = append(got, f.Path)
	}
	want := []string{"agent.json", "fb/f_default.md", "prompts/steps/a/b/f_default.md", "prompts/steps/a/b/f_other.md",
		"reg.json", "s/one.yaml", "schemas/nested/more.schema.json", "schemas/out.schema.json", "shared/generic.md", "skills/x/SKILL.md", "sys.md",
		"three.yaml", "two.yaml"}
	if !slices.Equal(got, want) {
		t.Fatalf("files\n got %v\nwant %v", got, want)
	}
	if err := fstest.TestFS(s, want...); err != nil {
		t.Fatal(err)
	}
	// The loader reads the definition from the snapshot.
	def, _, err := LoadFS(s, dir)
	if err != nil || def.Name != "a" || def.FS() != s {
		t.Fatalf("LoadFS: %v %+v", err, def)
	}
}

func TestDigestIsSha256sumOfSortedFileDigests(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, agentFiles)
	s, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for _, f := range s.Files() {
		data, _ := os.ReadFile(filepath.Join(dir, f.Path))
		sum := sha256.Sum256(data)
		if f.Digest != "sha256:"+hex.EncodeToString(sum[:]) || f.Size != int64(len(data)) {
			t.Fatalf("file %+v", f)
		}
		fmt.Fprintf(&lines, "%x  %s\n", sum, f.Path)
	}
	if sum := sha256.Sum256([]byte(lines.String())); s.Digest() != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %s", s.Digest())
	}
	again, _ := TakeSnapshot(dir, SnapshotOptions{})
	if again.Digest() != s.Digest() {
		t.Fatal("the digest of an unchanged folder changed")
	}
}

// Edits of the folder after Take change nothing in the snapshot; Diff
// names every change.
func TestSnapshotIgnoresLaterEditsAndDiffNamesThem(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, agentFiles)
	s, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"sys.md": "forged", "prompts/steps/a/b/f_new.md": "new"})
	os.Remove(filepath.Join(dir, "fb", "f_default.md"))
	if b, err := s.ReadFile("sys.md"); err != nil || string(b) != "system" {
		t.Fatalf("sys.md %q %v", b, err)
	}
	now, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Diff(now)
	want := []SnapshotChange{{"fb/f_default.md", Removed}, {"prompts/steps/a/b/f_new.md", Added}, {"sys.md", Modified}}
	if !slices.Equal(got, want) {
		t.Fatalf("diff %v", got)
	}
	if d := s.Diff(s); len(d) != 0 {
		t.Fatalf("self diff %v", d)
	}
}

func TestSaveAndOpenRoundTripAndRefuseTampering(t *testing.T) {
	dir, runDir := t.TempDir(), t.TempDir()
	write(t, dir, agentFiles)
	s, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Save(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := s.Save(runDir); err != nil || p2 != p {
		t.Fatalf("second Save: %s %v", p2, err)
	}
	rec := s.Record()
	back, err := OpenSnapshot(runDir, rec, dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Digest() != s.Digest() || len(back.Diff(s)) != 0 || back.Dir() != dir {
		t.Fatalf("round trip %s vs %s", back.Digest(), s.Digest())
	}
	leftovers, _ := filepath.Glob(filepath.Join(runDir, ".definition-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}

	// A record whose digest differs (the journal says one thing, the file
	// holds another).
	forged := *rec
	forged.Digest = strings.Replace(rec.Digest, rec.Digest[7:9], "00", 1)
	if forged.Digest == rec.Digest {
		forged.Digest = strings.Replace(rec.Digest, rec.Digest[7:9], "11", 1)
	}
	os.Link(p, filepath.Join(runDir, SnapshotRecordFile(forged.Digest)))
	if _, err := OpenSnapshot(runDir, &forged, dir); agenterr.CodeOf(err) != agenterr.CodeDefinitionMismatch {
		t.Fatalf("forged digest: %v", err)
	}
	// Content changed inside the file.
	data, _ := os.ReadFile(p)
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte(strings.Replace(string(data), "system", "SYSTEM", 1)), 0o644)
	if _, err := OpenSnapshot(runDir, rec, dir); agenterr.CodeOf(err) != agenterr.CodeDefinitionMismatch {
		t.Fatalf("tampered: %v", err)
	}
	// Not a tar at all.
	os.WriteFile(p, []byte("garbage"), 0o644)
	if _, err := OpenSnapshot(runDir, rec, dir); agenterr.CodeOf(err) != agenterr.CodeDefinitionMismatch {
		t.Fatalf("garbage: %v", err)
	}
	os.Remove(p)
	if _, err := OpenSnapshot(runDir, rec, dir); agenterr.CodeOf(err) != agenterr.CodeDefinitionMissing {
		t.Fatalf("missing: %v", err)
	}
	if _, err := OpenSnapshot(runDir, nil, dir); agenterr.CodeOf(err) != agenterr.CodeDefinitionMissing {
		t.Fatalf("no record: %v", err)
	}
}

func TestTakeBounds(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, agentFiles)
	big := make([]byte, MaxFileBytes+1)
	os.WriteFile(filepath.Join(dir, "prompts", "huge.md"), big, 0o644)
	_, err := TakeSnapshot(dir, SnapshotOptions{})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeDefinitionTooLarge || e.File != "prompts/huge.md" {
		t.Fatalf("big file: %v", err)
	}
	os.Remove(filepath.Join(dir, "prompts", "huge.md"))
	for i := range MaxFiles {
		os.WriteFile(filepath.Join(dir, "schemas", fmt.Sprintf("s%d.json", i)), nil, 0o644)
	}
	if _, err := TakeSnapshot(dir, SnapshotOptions{}); agenterr.CodeOf(err) != agenterr.CodeDefinitionTooLarge {
		t.Fatalf("many files: %v", err)
	}
}

// Symbolic links out of a prompt or schema folder are refused, as the
// resolvers refuse them; FIFOs are left out without blocking.
func TestTakeRefusesEscapingLinksAndSkipsSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, agentFiles)
	if err := syscall.Mkfifo(filepath.Join(dir, "prompts", "fifo.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil || s.Has("prompts/fifo.md") {
		t.Fatalf("fifo: %v", err)
	}
	// A link inside the prompt folder is read.
	os.Symlink("steps/a/b/f_default.md", filepath.Join(dir, "prompts", "alias.md"))
	if s, err = TakeSnapshot(dir, SnapshotOptions{}); err != nil || !s.Has("prompts/alias.md") {
		t.Fatalf("inner link: %v", err)
	}
	// A link to agent.json leaves the prompt folder.
	os.Symlink("../agent.json", filepath.Join(dir, "prompts", "leak.md"))
	_, err = TakeSnapshot(dir, SnapshotOptions{})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodePathEscape || e.File != "prompts/leak.md" {
		t.Fatalf("escaping link: %v", err)
	}
}

func TestTakeReportsLoaderErrors(t *testing.T) {
	if _, err := TakeSnapshot(filepath.Join(t.TempDir(), "nope"), SnapshotOptions{}); agenterr.CodeOf(err) != agenterr.CodeConfigurationNotFound {
		t.Fatalf("missing folder: %v", err)
	}
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "agent.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := TakeSnapshot(dir, SnapshotOptions{})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeConfigurationParse || !strings.Contains(e.Message, "not a regular file") {
		t.Fatalf("agent.json is a FIFO: %v", err)
	}
	os.Remove(filepath.Join(dir, "agent.json"))
	write(t, dir, map[string]string{"agent.json": "{"})
	_, err = TakeSnapshot(dir, SnapshotOptions{})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeConfigurationParse || e.File != "agent.json" {
		t.Fatalf("broken agent.json: %v", err)
	}
}

// TakeConfig's decoded files, checked by CheckLoaded, give the
// result CheckFS gives on the snapshot, for every example agent and
// for an invalid one; later edits of the folder change nothing, and the
// definition's files are the snapshot's.
func TestCheckLoadedChecksWhatWasTaken(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "examples", "*", "agent.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	invalid := t.TempDir()
	write(t, invalid, agentFiles)
	write(t, invalid, map[string]string{"reg.json": `{"entryStep": 5, "steps": {"s": {"stepId": "s", "c2": "a", "c3": 7}}}`})
	for _, p := range append(dirs, filepath.Join(invalid, "agent.json")) {
		dir := filepath.Dir(p)
		snap, def, reg, err := TakeConfigSnapshot(dir, SnapshotOptions{})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		got := CheckLoaded(snap, dir, def, reg, ValidateOptions{})
		want := CheckFS(snap, dir, ValidateOptions{})
		g, _ := got.MarshalJSON()
		w, _ := want.MarshalJSON()
		if string(g) != string(w) {
			t.Fatalf("%s:\nCheckLoaded %s\nCheckFS     %s", dir, g, w)
		}
		if def.FS() != snap {
			t.Fatalf("%s: the definition's files are %T, not the snapshot", dir, def.FS())
		}
		if dir == invalid && got.Valid() {
			t.Fatalf("%s: numbers for strings are valid: %s", dir, g)
		}
	}

	dir := t.TempDir()
	write(t, dir, agentFiles)
	snap, def, reg, err := TakeConfigSnapshot(dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := CheckFS(snap, dir, ValidateOptions{}).MarshalJSON()
	write(t, dir, map[string]string{"agent.json": "{", "reg.json": `{"steps": 1}`})
	os.RemoveAll(filepath.Join(dir, "prompts"))
	os.RemoveAll(filepath.Join(dir, "skills"))
	if after, _ := CheckLoaded(snap, dir, def, reg, ValidateOptions{}).MarshalJSON(); string(after) != string(before) {
		t.Fatalf("the folder edited after the snapshot was checked:\n%s\nnot\n%s", after, before)
	}
}

func TestCheckLoadedRefusesValuesNotLoaded(t *testing.T) {
	res := CheckLoaded(nil, t.TempDir(), &Definition{}, &Registry{}, ValidateOptions{})
	if errs := res.Errors(); len(errs) != 1 || errs[0].Code != agenterr.CodeConfigurationValidation || !strings.Contains(errs[0].Message, "loaded by LoadFS") {
		t.Fatalf("%+v", errs)
	}
}

// TestSaveRemovesTheTemporaryFileOfAKilledSave: a process killed while it
// wrote a snapshot leaves .definition-*.tmp in the run's record; the next
// Save (the resumed run's) removes it, whether it writes the snapshot or
// finds it there.
func TestSaveRemovesTheTemporaryFileOfAKilledSave(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, agentFiles)
	s, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, saved := range []bool{false, true} {
		runDir := t.TempDir()
		if saved {
			if _, err := s.Save(runDir); err != nil {
				t.Fatal(err)
			}
		}
		stale := filepath.Join(runDir, ".definition-4242.tmp")
		if err := os.WriteFile(stale, []byte("half a tar"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Save(runDir); err != nil {
			t.Fatal(err)
		}
		if left, _ := filepath.Glob(filepath.Join(runDir, ".definition-*")); len(left) != 0 {
			t.Fatalf("snapshot already saved %v: temporary files left: %v", saved, left)
		}
		if _, err := OpenSnapshot(runDir, s.Record(), dir); err != nil {
			t.Fatalf("snapshot already saved %v: %v", saved, err)
		}
	}
}

// TestSaveLinksTheFileItWroteForTheNextRun: the runs of one Snapshot (an
// embedder's agents of one Load) share the file the first Save wrote by a
// hard link, and a Save whose last file was altered or removed writes a
// new one; every run's copy opens against the recorded digest.
func TestSaveLinksTheFileItWroteForTheNextRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, agentFiles)
	s, err := TakeSnapshot(dir, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	save := func() (string, os.FileInfo) {
		t.Helper()
		runDir := t.TempDir()
		p, err := s.Save(runDir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OpenSnapshot(runDir, s.Record(), dir); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return p, fi
	}
	first, firstInfo := save()
	_, second := save()
	if !os.SameFile(firstInfo, second) {
		t.Fatal("the second run's snapshot is a new file, want a link to the first run's")
	}
	// The first run's file altered (made writable, written, its time
	// moved): the next run gets a file of its own, which opens.
	if err := os.Chmod(first, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(first, []byte("not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	thirdPath, third := save()
	if os.SameFile(firstInfo, third) {
		t.Fatal("the third run's snapshot links the altered file")
	}
	if third.Mode().Perm() != 0o444 {
		t.Fatalf("the third run's snapshot has mode %v, want read-only", third.Mode())
	}
	// The file the links come from removed: the next Save writes again.
	if err := os.Remove(thirdPath); err != nil {
		t.Fatal(err)
	}
	if _, fourth := save(); fourth.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Fatalf("the fourth run's snapshot has %d names, want a file of its own", fourth.Sys().(*syscall.Stat_t).Nlink)
	}
}
