package agentdir

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/regularfile"
	"github.com/capstan-dev/capstan/llm/modelspec"
)

// Options configure Take.
type SnapshotOptions struct {
	// Models are model specs used besides runner.model and the steps' own
	// models (such as a --model override). The script file of every
	// "script:<file>" among them is part of the definition.
	Models []string
}

// Take reads the agent folder dir once and returns its snapshot: the
// configuration files (agent.json and the steps registry), every file
// under the prompt base and the fallback directory, steps' fallback
// prompts, the system prompt, the files under schemas/, the script files
// of script models (runner.model, steps' models, opts.Models), the
// SKILL.md files of runner.skills and the hidden test files that
// runner.verification.hidden names.
//
// Each tree is read through an os.Root opened on it, so neither ".." nor a
// symbolic link can take a read outside it: such a link is refused with
// PATH_ESCAPE, as the prompt and schema resolvers refuse it. Symbolic links
// to directories are not followed; FIFOs and other special files are left
// out. A broken agent.json or registry is the loader's coded error
// (CONFIG_NOT_FOUND, CONFIG_PARSE); a folder beyond the bounds is
// DEFINITION_TOO_LARGE. Paths that leave the agent folder are not read
// (validation reports them).
func TakeSnapshot(dir string, opts SnapshotOptions) (*Snapshot, error) {
	snap, _, _, err := TakeConfigSnapshot(dir, opts)
	return snap, err
}

// TakeConfig is Take that also returns agent.json and the steps registry
// as the loader decoded them from the snapshot's own bytes, with
// ApplyDefaults applied. Passed with the snapshot to
// CheckLoaded, they are validated without reading or decoding the
// files a second time, and what is checked is exactly what the snapshot
// holds. The caller owns def and reg; until CheckLoaded gives them the
// snapshot as their FS, their FS is the reader Take closed.
func TakeConfigSnapshot(dir string, opts SnapshotOptions) (snap *Snapshot, def *Definition, reg *Registry, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, nil, agenterr.Wrap(err, agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false, "cannot locate agent folder %q", dir)
	}
	b := &builder{dir: abs, files: map[string][]byte{}}
	defer b.close()
	// The loader reads agent.json and the registry through the builder,
	// which records them; a broken file is the loader's own error.
	def, reg, err = LoadFS(b, dir)
	if err != nil {
		return nil, nil, nil, err
	}
	if b.err != nil {
		return nil, nil, nil, b.err
	}
	ApplyDefaults(def, reg)
	r := def.Runner
	trees := []string{r.Prompts.Base, r.SchemasDir}
	if r.Prompts.FallbackDir != "" {
		trees = append(trees, r.Prompts.FallbackDir)
	}
	for _, t := range trees {
		if err := b.tree(t, func(string) bool { return true }); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, s := range r.Skills {
		if err := b.tree(s, func(name string) bool { return path.Base(name) == "SKILL.md" || path.Base(name) == "skill.md" }); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, g := range r.Verification.Hidden {
		// the hidden test files (validation reports a bad glob)
		if !doublestar.ValidatePattern(g) {
			continue
		}
		base, _ := doublestar.SplitPattern(g)
		if err := b.tree(base, func(name string) bool { ok, _ := doublestar.Match(g, name); return ok }); err != nil {
			return nil, nil, nil, err
		}
	}
	singles := []string{}
	if r.SystemPromptPath != "" {
		singles = append(singles, r.SystemPromptPath)
	}
	models := append([]string{r.Model}, opts.Models...)
	for _, st := range reg.Steps {
		models = append(models, st.Model)
		if st.Fallback != "" {
			// A step's fallback prompt is relative to the prompt base and
			// may lie anywhere in the agent folder.
			f := st.Fallback
			if !filepath.IsAbs(f) {
				f = filepath.Join(r.Prompts.Base, f)
			}
			singles = append(singles, f)
		}
	}
	for _, m := range models {
		if file, ok := scriptFile(m); ok {
			singles = append(singles, file)
		}
	}
	for _, f := range singles {
		if err := b.single(f); err != nil {
			return nil, nil, nil, err
		}
	}
	return newSnapshot(abs, b.files), def, reg, nil
}

// scriptFile returns the script file of a "script:<file>" model spec
// (script.yaml, the script provider's default, when <file> is empty) and
// whether spec names the script provider.
func scriptFile(spec string) (string, bool) {
	provider, model := modelspec.Parse(spec)
	if provider != "script" {
		return "", false
	}
	if model == "" {
		model = "script.yaml"
	}
	return model, true
}

// builder reads the files of a snapshot. It is the fs.FS the loader reads
// agent.json and the registry through while a snapshot is taken.
type builder struct {
	dir   string
	root  *os.Root
	err   error // the first error of a read through Open
	files map[string][]byte
	total int64
}

func (b *builder) close() {
	if b.root != nil {
		b.root.Close()
	}
}

func (b *builder) openRoot() (*os.Root, error) {
	if b.root == nil {
		r, err := os.OpenRoot(b.dir)
		if err != nil {
			return nil, err
		}
		b.root = r
	}
	return b.root, nil
}

// local turns a configured path into a clean slash path inside the agent
// folder, or reports false when it is absolute or climbs out.
func (b *builder) local(p string) (string, bool) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(b.dir, p)
		if err != nil {
			return "", false
		}
		p = rel
	}
	p = path.Clean(filepath.ToSlash(p))
	return p, fs.ValidPath(p) && !strings.HasPrefix(p, "../") && p != ".."
}

// Open implements fs.FS for the loader: a file is read (once) and
// recorded; "." is the agent folder.
func (b *builder) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	root, err := b.openRoot()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if name == "." {
		return root.Open(".")
	}
	if _, ok := b.files[name]; !ok {
		if err := b.read(root, name, name); err != nil {
			var nr *regularfile.NotRegularError
			if errors.As(err, &nr) {
				// Let the loader see what it is and report it.
				return statOnly{nr.Info}, nil
			}
			var ae *agenterr.Error
			if errors.As(err, &ae) && b.err == nil {
				b.err = err
			}
			return nil, err
		}
	}
	data := b.files[name]
	return &openFile{e: &entry{name: name, data: data}, r: bytes.NewReader(data)}, nil
}

// read reads root/rel into files[name], bounded.
func (b *builder) read(root *os.Root, rel, name string) error {
	// A FIFO planted in the folder must not block the read.
	f, fi, err := regularfile.Open(root.OpenFile, filepath.FromSlash(rel))
	if err != nil {
		if isEscape(err) {
			return escapeError(name)
		}
		return err
	}
	defer f.Close()
	if fi.Size() > MaxFileBytes {
		return tooLarge(name, "%s is %d bytes; a file of an agent definition may have at most %d", name, fi.Size(), MaxFileBytes)
	}
	if len(b.files) >= MaxFiles {
		return tooLarge("", "the agent definition has more than %d files", MaxFiles)
	}
	// Read into a buffer of the file's size: one allocation per file.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileBytes+1)); err != nil {
		return err
	}
	data := buf.Bytes()
	if len(data) > MaxFileBytes {
		return tooLarge(name, "%s has more than %d bytes", name, MaxFileBytes)
	}
	b.total += int64(len(data))
	if b.total > MaxTotalBytes {
		return tooLarge(name, "the agent definition has more than %d bytes (at %s)", MaxTotalBytes, name)
	}
	b.files[name] = data
	return nil
}

// single records the file p (relative to the agent folder) when it exists.
func (b *builder) single(p string) error {
	rel, ok := b.local(p)
	if !ok {
		return nil
	}
	if _, done := b.files[rel]; done {
		return nil
	}
	root, err := b.openRoot()
	if err != nil {
		return err
	}
	err = b.read(root, rel, rel)
	var nr *regularfile.NotRegularError
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.As(err, &nr) {
		return nil // validation reports missing files and FIFOs
	}
	return err
}

// tree records the regular files under the folder p (relative to the
// agent folder) whose path (relative to the agent folder, "/"-separated)
// keep accepts, read through an os.Root on that folder.
func (b *builder) tree(p string, keep func(name string) bool) error {
	rel, ok := b.local(p)
	if !ok {
		return nil
	}
	top, err := b.openRoot()
	if err != nil {
		return err
	}
	root := top
	if rel != "." {
		root, err = top.OpenRoot(filepath.FromSlash(rel))
		switch {
		case err == nil:
			defer root.Close()
		case isEscape(err):
			return escapeError(rel)
		default:
			return nil // missing or not a folder: validation reports it
		}
	}
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return nil
			}
			return err
		}
		if d.IsDir() {
			if p != "." && (d.Name() == ".git" || d.Name() == ".capstan") {
				return fs.SkipDir
			}
			return nil
		}
		name := path.Join(rel, p)
		if !keep(name) {
			return nil
		}
		if _, done := b.files[name]; done {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := root.Stat(filepath.FromSlash(p))
			if isEscape(err) {
				return escapeError(name)
			}
			if err != nil || !fi.Mode().IsRegular() {
				return nil // a link to a folder, or dangling
			}
		} else if !d.Type().IsRegular() {
			return nil // FIFOs, sockets, devices
		}
		err = b.read(root, p, name)
		var nr *regularfile.NotRegularError
		if errors.Is(err, fs.ErrNotExist) || errors.As(err, &nr) {
			return nil
		}
		return err
	})
}

// statOnly is an open special file that can only be described.
type statOnly struct{ info fs.FileInfo }

func (f statOnly) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f statOnly) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: f.info.Name(), Err: fs.ErrInvalid}
}
func (f statOnly) Close() error { return nil }

// isEscape reports whether err is os.Root's refusal of a path that leaves
// the root.
func isEscape(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

func escapeError(name string) error {
	e := agenterr.New(agenterr.CodePathEscape, agenterr.LayerConfiguration, false,
		"%s leads outside its folder (through \"..\" or a symbolic link)", name)
	e.File = name
	e.Hint = "keep the files of an agent definition, and the targets of symbolic links among them, inside the agent folder"
	return e
}

// modTime is the time stamped on snapshot files written to a run record:
// fixed, so that the same definition always gives the same bytes.
var modTime = time.Unix(0, 0).UTC()
