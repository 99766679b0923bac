package agentdir

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
)

// Record is what a run's run.start event says about its definition.
type SnapshotRecord struct {
	// Digest is the overall digest of the definition the run uses.
	Digest string `json:"digest"`
	// Files are the definition's files with their digests.
	Files []SnapshotFile `json:"files"`
	// Resume is set when the run.start event begins a resumed run.
	Resume *SnapshotResume `json:"resume,omitempty"`
	// Snapshot is the file holding the definition, relative to the run
	// record's directory.
	Snapshot string `json:"snapshot"`
}

// Resume says how the definition of a resumed run relates to the one the
// run had recorded.
type SnapshotResume struct {
	// Reloaded is true when the run continues with the agent folder's
	// current files instead of the recorded definition (resume
	// --reload-definition).
	Reloaded bool `json:"reloaded"`
	// RecordedDigest is the digest of the definition the run had recorded
	// ("" when it was recorded without one).
	RecordedDigest string `json:"recordedDigest,omitempty"`
	// Changes are how the agent folder on disk differed from the recorded
	// definition when the run was resumed.
	Changes []SnapshotChange `json:"changes,omitempty"`
	// Problem is why the agent folder could not be compared (it is gone,
	// or no longer loads), when it could not.
	Problem string `json:"problem,omitempty"`
}

// Record describes s for the run.start event.
func (s *Snapshot) Record() *SnapshotRecord {
	return &SnapshotRecord{Digest: s.digest, Files: s.Files(), Snapshot: SnapshotRecordFile(s.digest)}
}

// RecordFile is the name of the file, inside a run record's directory,
// that holds the definition with the given digest: definition-<the first
// 16 hex digits>.tar. A run keeps one file per definition it used.
func SnapshotRecordFile(digest string) string {
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) > 16 {
		h = h[:16]
	}
	return "definition-" + h + ".tar"
}

// Save writes s into the run record directory runDir as a tar file (see
// RecordFile), unless it is already there. The file is written under a
// temporary name and renamed, so a killed process never leaves half a
// snapshot behind. It returns the file's path.
func (s *Snapshot) Save(runDir string) (string, error) {
	// A process killed while it wrote a snapshot left its temporary file:
	// one process at a time writes a run's record, so it is garbage.
	if stale, _ := filepath.Glob(filepath.Join(runDir, ".definition-*.tmp")); len(stale) > 0 {
		for _, p := range stale {
			_ = os.Remove(p)
		}
	}
	dst := filepath.Join(runDir, SnapshotRecordFile(s.digest))
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	s.tar.once.Do(func() { s.tar.data, s.tar.err = s.Tar() })
	data, err := s.tar.data, s.tar.err
	if err != nil {
		return "", err
	}
	if s.linkSaved(dst) {
		return dst, nil
	}
	tmp, err := os.CreateTemp(runDir, ".definition-*.tmp")
	if err != nil {
		return "", fmt.Errorf("definition: write snapshot: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("definition: write snapshot %s: %w", dst, err)
	}
	if fi, err := os.Lstat(dst); err == nil {
		s.saved.mu.Lock()
		s.saved.path, s.saved.info = dst, fi
		s.saved.mu.Unlock()
	}
	return dst, nil
}

// linkSaved makes dst a hard link to the snapshot file this Snapshot
// wrote last, when that file is still the one it wrote (same file, size,
// modification time and read-only mode): one link(2) instead of a new
// file written, synced and renamed for every run of an embedder that
// builds many agents from one Load. The linked file was synced when it
// was written; a file altered since (which the checks above would miss
// only if its size and time were kept) is still refused when the run is
// resumed, since OpenSnapshot checks its content against the digest the
// journal recorded. It reports false, leaving dst alone, when there is no
// such file or the link fails (another file system, a removed run).
func (s *Snapshot) linkSaved(dst string) bool {
	s.saved.mu.Lock()
	path, info := s.saved.path, s.saved.info
	s.saved.mu.Unlock()
	if path == "" {
		return false
	}
	fi, err := os.Lstat(path)
	if err != nil || !os.SameFile(fi, info) || fi.Size() != info.Size() || !fi.ModTime().Equal(info.ModTime()) ||
		fi.Mode() != info.Mode() || fi.Mode()&0o222 != 0 {
		return false
	}
	return os.Link(path, dst) == nil
}

// Tar returns s as the tar file Save writes: the way to move a pinned
// definition to another process (FromTar reads it back).
func (s *Snapshot) Tar() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range s.list {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: 0o444, Size: f.Size, ModTime: modTime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("definition: write snapshot: %w", err)
		}
		if _, err := tw.Write(s.files[f.Path].data); err != nil {
			return nil, fmt.Errorf("definition: write snapshot: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("definition: write snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// FromTar reads a snapshot written by Tar (within the bounds of Take) and
// checks that its content has digest; agentDir is what Dir reports. A
// mismatch is DEFINITION_SNAPSHOT_MISMATCH.
func SnapshotFromTar(data []byte, digest, agentDir string) (*Snapshot, error) {
	s, err := readTar(bytes.NewReader(data), agentDir)
	if err == nil && s.digest != digest {
		err = fmt.Errorf("its content has digest %s, expected %s", s.digest, digest)
	}
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeDefinitionMismatch, agenterr.LayerConfiguration, false, "the agent definition sent with the run does not match its digest")
		e.Hint = "start the run again so the definition is sent afresh"
		return nil, e
	}
	return s, nil
}

// Open reads the definition a run recorded: rec names the file in the run
// record directory runDir and the digest it must have; agentDir is the
// agent folder the run started from (what Dir reports). A file that is not
// there is DEFINITION_SNAPSHOT_MISSING; one whose content does not give
// rec.Digest (altered, damaged, or not a snapshot) is
// DEFINITION_SNAPSHOT_MISMATCH. Reading is bounded like Take.
func OpenSnapshot(runDir string, rec *SnapshotRecord, agentDir string) (*Snapshot, error) {
	if rec == nil || rec.Digest == "" {
		e := agenterr.New(agenterr.CodeDefinitionMissing, agenterr.LayerConfiguration, false,
			"the run was recorded without a definition snapshot")
		e.Hint = "resume with --reload-definition to continue with the agent folder's current files (the choice is journaled)"
		return nil, e
	}
	name := SnapshotRecordFile(rec.Digest)
	p := filepath.Join(runDir, name)
	f, err := os.Open(p)
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeDefinitionMissing, agenterr.LayerConfiguration, false,
			"the run's definition snapshot %s cannot be read", name)
		e.File = p
		e.Hint = "resume with --reload-definition to continue with the agent folder's current files (the choice is journaled), or start a new run"
		return nil, e
	}
	defer f.Close()
	s, err := readTar(f, agentDir)
	if err == nil && s.digest != rec.Digest {
		err = fmt.Errorf("its content has digest %s, the journal recorded %s", s.digest, rec.Digest)
	}
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeDefinitionMismatch, agenterr.LayerConfiguration, false,
			"the run's definition snapshot %s does not match its journal", name)
		e.File = p
		e.Hint = "the snapshot was altered or damaged; resume with --reload-definition to continue with the agent folder's current files (the choice is journaled), or start a new run"
		return nil, e
	}
	return s, nil
}

// readTar reads a snapshot written by Save, within the bounds of Take.
func readTar(r io.Reader, dir string) (*Snapshot, error) {
	tr := tar.NewReader(r)
	files := map[string][]byte{}
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch {
		case hdr.Typeflag != tar.TypeReg:
			return nil, fmt.Errorf("entry %q is not a regular file", hdr.Name)
		case !fs.ValidPath(hdr.Name) || hdr.Name == ".":
			return nil, fmt.Errorf("entry %q is not a clean relative path", hdr.Name)
		case files[hdr.Name] != nil:
			return nil, fmt.Errorf("entry %q appears twice", hdr.Name)
		case hdr.Size < 0 || hdr.Size > MaxFileBytes:
			return nil, fmt.Errorf("entry %q has %d bytes; the limit is %d", hdr.Name, hdr.Size, MaxFileBytes)
		case len(files) >= MaxFiles:
			return nil, fmt.Errorf("more than %d entries", MaxFiles)
		}
		total += hdr.Size
		if total > MaxTotalBytes {
			return nil, fmt.Errorf("more than %d bytes", MaxTotalBytes)
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		files[hdr.Name] = data
	}
	return newSnapshot(dir, files), nil
}
