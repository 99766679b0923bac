// A Snapshot pins an agent definition for the life of a run.
//
// TakeSnapshot reads every file of an agent folder that the run depends on —
// agent.json, the steps registry, the prompt templates (prompt base,
// fallback directory, steps' fallbacks, system prompt), the JSON Schemas
// under schemas/, the script files of script models and the SKILL.md files
// of declared skills — once, into memory. The resulting Snapshot is an [io/fs.FS]: the
// configuration loader, the prompt and schema resolvers, the skill catalog
// and the script provider read through it for the whole run, so an edit of
// the folder after the start (by the model, with Bash or Write) changes
// nothing in the running agent.
//
// Every file carries a SHA-256 digest and the snapshot an overall digest
// over all of them. The run journals the digests in its run.start event and
// stores the snapshot itself as a tar file next to the journal (Save), so
// `capstan resume` continues with exactly the recorded definition (OpenSnapshot
// refuses a snapshot that is missing or does not match its digest).

package agentdir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
)

// Bounds of a snapshot. A definition is small; a folder that exceeds one of
// these is refused with DEFINITION_TOO_LARGE rather than read into memory.
const (
	// MaxFileBytes bounds one file (the largest configuration file the
	// loaders accept).
	MaxFileBytes = 8 << 20
	// MaxTotalBytes bounds the sum of all files.
	MaxTotalBytes = 32 << 20
	// MaxFiles bounds the number of files.
	MaxFiles = 4096
)

// File is one file of a snapshot as the journal records it.
type SnapshotFile struct {
	// Path is the file's path relative to the agent folder, with forward
	// slashes.
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// Digest is "sha256:" followed by the hex SHA-256 of the content.
	Digest string `json:"digest"`
}

// Change is one difference between two snapshots.
type SnapshotChange struct {
	Path string `json:"path"`
	// Kind is "added", "removed" or "modified" (seen from the older
	// snapshot towards the newer one).
	Kind string `json:"kind"`
}

// Kinds of Change.
const (
	Added    = "added"
	Removed  = "removed"
	Modified = "modified"
)

// Snapshot is an immutable, in-memory copy of an agent definition. It
// implements fs.FS, fs.ReadFileFS, fs.StatFS and fs.ReadDirFS with paths
// relative to the agent folder. It is safe for concurrent use; its content
// is shared, never copied per reader (ReadFile returns a copy, as
// fs.ReadFileFS requires; Open reads from the shared bytes).
type Snapshot struct {
	dir    string // the agent folder it was taken from (absolute), or recorded in the run
	files  map[string]*entry
	dirs   map[string][]fs.DirEntry // directory → sorted entries ("." is the root)
	list   []SnapshotFile           // sorted by path
	digest string
	size   int64
	// tar is the snapshot as the tar file Save writes, made at the first
	// Save and shared by every run that saves it (an embedder's agents of
	// one definition wrote the same tar, about 20 KB, each).
	tar struct {
		once sync.Once
		data []byte
		err  error
	}
	// saved is the last file Save wrote: the next run's Save links it
	// (see Save) instead of writing and syncing the same bytes again.
	saved struct {
		mu   sync.Mutex
		path string
		info os.FileInfo
	}
}

type entry struct {
	name   string // path
	data   []byte
	digest string
}

// newSnapshot indexes files (path → content) and computes the digests.
func newSnapshot(dir string, files map[string][]byte) *Snapshot {
	s := &Snapshot{dir: dir, files: make(map[string]*entry, len(files)), dirs: map[string][]fs.DirEntry{".": nil}}
	for p, data := range files {
		sum := sha256.Sum256(data)
		s.files[p] = &entry{name: p, data: data, digest: "sha256:" + hex.EncodeToString(sum[:])}
		s.size += int64(len(data))
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	seenDir := map[string]bool{".": true}
	h := sha256.New()
	s.list = make([]SnapshotFile, 0, len(paths))
	for _, p := range paths {
		e := s.files[p]
		s.list = append(s.list, SnapshotFile{Path: p, Size: int64(len(e.data)), Digest: e.digest})
		// The overall digest is the SHA-256 of `sha256sum`-style lines,
		// "<hex>  <path>\n", in byte order of the paths.
		io.WriteString(h, strings.TrimPrefix(e.digest, "sha256:")+"  "+p+"\n")
		dir := path.Dir(p)
		s.dirs[dir] = append(s.dirs[dir], dirEntry{info: fileInfo{name: path.Base(p), size: int64(len(e.data))}})
		for d := dir; d != "." && !seenDir[d]; d = path.Dir(d) {
			seenDir[d] = true
			if _, ok := s.dirs[d]; !ok {
				s.dirs[d] = []fs.DirEntry{}
			}
			parent := path.Dir(d)
			s.dirs[parent] = append(s.dirs[parent], dirEntry{info: fileInfo{name: path.Base(d), dir: true}})
		}
	}
	for d, entries := range s.dirs {
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		s.dirs[d] = entries
	}
	s.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return s
}

// Dir is the agent folder the snapshot was taken from (absolute).
func (s *Snapshot) Dir() string { return s.dir }

// Digest is the overall digest: "sha256:" followed by the hex SHA-256 of
// the lines "<file hex>  <path>\n" of every file, sorted by path (bytewise)
// — what `LC_ALL=C sort -k2 | sha256sum` gives over `sha256sum` output.
func (s *Snapshot) Digest() string { return s.digest }

// Files lists the files with their sizes and digests, sorted by path.
func (s *Snapshot) Files() []SnapshotFile { return slices.Clone(s.list) }

// Size is the total number of bytes of all files.
func (s *Snapshot) Size() int64 { return s.size }

// Has reports whether the snapshot holds the file name.
func (s *Snapshot) Has(name string) bool { return s.files[name] != nil }

// Diff lists how newer differs from s, sorted by path.
func (s *Snapshot) Diff(newer *Snapshot) []SnapshotChange {
	var out []SnapshotChange
	for _, f := range s.list {
		switch n := newer.files[f.Path]; {
		case n == nil:
			out = append(out, SnapshotChange{Path: f.Path, Kind: Removed})
		case n.digest != f.Digest:
			out = append(out, SnapshotChange{Path: f.Path, Kind: Modified})
		}
	}
	for _, f := range newer.list {
		if s.files[f.Path] == nil {
			out = append(out, SnapshotChange{Path: f.Path, Kind: Added})
		}
	}
	slices.SortFunc(out, func(a, b SnapshotChange) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Open implements fs.FS.
func (s *Snapshot) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if e := s.files[name]; e != nil {
		return &openFile{e: e, r: bytes.NewReader(e.data)}, nil
	}
	if entries, ok := s.dirs[name]; ok {
		return &openDir{name: name, entries: entries}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile implements fs.ReadFileFS. It returns a copy of the content.
func (s *Snapshot) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	if e := s.files[name]; e != nil {
		return bytes.Clone(e.data), nil
	}
	if _, ok := s.dirs[name]; ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errIsDir}
	}
	return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
}

// Stat implements fs.StatFS.
func (s *Snapshot) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if e := s.files[name]; e != nil {
		return fileInfo{name: path.Base(name), size: int64(len(e.data))}, nil
	}
	if _, ok := s.dirs[name]; ok {
		return fileInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// ReadDir implements fs.ReadDirFS.
func (s *Snapshot) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	entries, ok := s.dirs[name]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(entries), nil
}

type errString string

func (e errString) Error() string { return string(e) }

const errIsDir = errString("is a directory")

type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (fi fileInfo) Name() string { return fi.name }
func (fi fileInfo) Size() int64  { return fi.size }
func (fi fileInfo) Mode() fs.FileMode {
	if fi.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.dir }
func (fi fileInfo) Sys() any           { return nil }

type dirEntry struct{ info fileInfo }

func (d dirEntry) Name() string               { return d.info.name }
func (d dirEntry) IsDir() bool                { return d.info.dir }
func (d dirEntry) Type() fs.FileMode          { return d.info.Mode().Type() }
func (d dirEntry) Info() (fs.FileInfo, error) { return d.info, nil }

type openFile struct {
	e *entry
	r *bytes.Reader
}

func (f *openFile) Stat() (fs.FileInfo, error) {
	return fileInfo{name: path.Base(f.e.name), size: int64(len(f.e.data))}, nil
}
func (f *openFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *openFile) Seek(off int64, whence int) (int64, error) {
	return f.r.Seek(off, whence)
}
func (f *openFile) ReadAt(b []byte, off int64) (int, error) { return f.r.ReadAt(b, off) }
func (f *openFile) Close() error                            { return nil }

type openDir struct {
	name    string
	entries []fs.DirEntry
	off     int
}

func (d *openDir) Stat() (fs.FileInfo, error) {
	return fileInfo{name: path.Base(d.name), dir: true}, nil
}
func (d *openDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errIsDir}
}
func (d *openDir) Close() error { return nil }
func (d *openDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}

// tooLarge is the DEFINITION_TOO_LARGE error for file (or the whole
// definition when file is "").
func tooLarge(file, format string, args ...any) error {
	e := agenterr.New(agenterr.CodeDefinitionTooLarge, agenterr.LayerConfiguration, false, format, args...)
	e.File = file
	e.Hint = "an agent definition holds configuration, prompts and schemas; move data files out of the prompt, schema and skill folders"
	return e
}
