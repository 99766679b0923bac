package agentdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/capstan-dev/capstan/agenterr"
)

// maxFileSize bounds agent.json and steps_registry.json; larger files are
// refused before parsing.
const maxFileSize = 8 << 20

// Load reads dir/agent.json and the steps registry it names
// (runner.prompts.registry, default steps_registry.json) and checks syntax
// only (loading checks syntax, Validate checks meaning). Values of the
// wrong type are left at their zero value here and reported by Validate.
//
// Errors: CONFIG_NOT_FOUND when a file is missing (hint: capstan init),
// CONFIG_PARSE with file and line:col for broken JSON, CONFIG_INVALID when
// the registry path leaves the agent folder.
func Load(dir string) (*Definition, *Registry, error) {
	return LoadFS(nil, dir)
}

// LoadFS is Load reading the agent's files from fsys (paths relative to the
// agent folder, such as a pinned definition snapshot) instead of the disk.
// dir is still the agent folder that relative paths and messages refer to.
// A nil fsys reads dir from disk. The returned definition remembers fsys
// (Definition.FS), so the layers above read prompts, schemas and scripts
// from the same files.
func LoadFS(fsys fs.FS, dir string) (*Definition, *Registry, error) {
	def, err := loadDefinition(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	reg, err := loadRegistry(fsys, dir, def)
	if err != nil {
		return nil, nil, err
	}
	return def, reg, nil
}

// FS returns the file system that holds the agent's files: the one given
// to NewAgentFS, or the one the definition was loaded from by LoadFS (a
// pinned snapshot of the agent folder); nil when they are read from disk.
func (d *Definition) FS() fs.FS {
	switch {
	case d == nil:
		return nil
	case d.files != nil:
		return d.files
	case d.src != nil:
		return d.src.fsys
	}
	return nil
}

func loadDefinition(fsys fs.FS, dir string) (*Definition, error) {
	var fi fs.FileInfo
	var err error
	if fsys != nil {
		fi, err = fs.Stat(fsys, ".")
	} else {
		fi, err = os.Stat(dir)
	}
	if err != nil || !fi.IsDir() {
		e := agenterr.New(agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false,
			"agent folder %q does not exist or is not a directory", dir)
		e.Hint = "pass the folder that contains agent.json, or create one with `capstan init NAME`"
		e.File = "."
		if file, serr := os.Stat(dir); serr == nil && !file.IsDir() {
			// A file (often agent.json itself) is named, not its folder.
			e.Message = fmt.Sprintf("agent folder %q is a file, not a folder", dir)
			if filepath.Base(dir) == AgentFile {
				e.Hint = "pass the folder that holds it: " + filepath.Dir(dir)
			}
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.Err = err // why it cannot be read (permissions…); "not exist" is the message already
		}
		return nil, e
	}
	raw, err := readConfigFile(fsys, dir, AgentFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// "no such file" is the message already: the OS's words
			// ("openat …") would only repeat it.
			e := agenterr.New(agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false,
				"no %s in %s", AgentFile, dir)
			e.File = AgentFile
			e.Hint = "create an agent with `capstan init NAME`, or pass the folder that contains agent.json"
			return nil, e
		}
		return nil, err
	}
	src := newSource(AgentFile, raw)
	var def Definition
	if err := decode(src, &def); err != nil {
		return nil, err
	}
	src.dir, src.fsys = dir, fsys
	def.src = src
	return &def, nil
}

func loadRegistry(fsys fs.FS, dir string, def *Definition) (*Registry, error) {
	name := def.Runner.Prompts.Registry
	ptr := "/runner/prompts/registry"
	if f := def.Runner.Flow; name == "" && f != nil && f.Prompts != nil && f.Prompts.Registry != "" {
		name, ptr = f.Prompts.Registry, "/runner/flow/prompts/registry"
	}
	if name == "" {
		name = DefaultRegistryFile
	}
	msg := LexicalInside(name)
	if msg == "" && fsys == nil {
		msg = insideDir(dir, name)
	}
	if msg != "" {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"runner.prompts.registry %q %s", name, msg)
		e.File, e.Pointer = AgentFile, ptr
		e.Line, e.Column = def.src.locate(ptr, false)
		e.Hint = "use a path relative to the agent folder, e.g. \"steps_registry.json\""
		return nil, e
	}
	rel := filepath.ToSlash(filepath.Clean(name))
	raw, err := readConfigFile(fsys, dir, rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			e := agenterr.New(agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false,
				"steps registry %s does not exist", rel)
			e.File = rel
			e.Hint = "create it (see docs/configuration.md) or point runner.prompts.registry in agent.json at it"
			return nil, e
		}
		return nil, err
	}
	src := newSource(rel, raw)
	var reg Registry
	if err := decode(src, &reg); err != nil {
		return nil, err
	}
	src.dir, src.fsys = dir, fsys
	reg.src = src
	return &reg, nil
}

// readConfigFile reads rel from fsys (nil: from the folder dir on disk),
// refusing non-regular and oversized files. A leading UTF-8 byte order mark
// (written by some editors) is dropped.
func readConfigFile(fsys fs.FS, dir, rel string) ([]byte, error) {
	if fsys == nil {
		fsys = os.DirFS(dir)
	}
	fi, err := fs.Stat(fsys, rel)
	if err != nil {
		return nil, err
	}
	refuse := func(format string, args ...any) error {
		e := agenterr.New(agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, "%s "+format, append([]any{rel}, args...)...)
		e.File = rel
		e.Hint = fmt.Sprintf("it must be a JSON file of at most %d MB", maxFileSize>>20)
		return e
	}
	tooBig := func() error { return refuse("is larger than %d MB", maxFileSize>>20) }
	switch {
	case fi.IsDir():
		return nil, refuse("is a directory, not a file")
	case !fi.Mode().IsRegular():
		return nil, refuse("is not a regular file (%s)", fi.Mode().Type())
	case fi.Size() > maxFileSize:
		return nil, tooBig()
	}
	f, err := fsys.Open(rel)
	if err == nil {
		defer f.Close()
		var raw []byte
		raw, err = io.ReadAll(io.LimitReader(f, maxFileSize+1))
		if err == nil {
			if len(raw) > maxFileSize {
				return nil, tooBig()
			}
			return bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")), nil
		}
	}
	e := agenterr.Wrap(err, agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false,
		"cannot read %s", rel)
	e.File = rel
	e.Hint = "check the file's permissions"
	return nil, e
}

// decode checks src's syntax and decodes it into v. Type mismatches are
// tolerated (the field keeps its zero value); Validate reports them against
// the JSON Schema with their pointer.
//
// A file that decodes without any error is decoded by go-json-experiment's
// decoder with encoding/json's semantics (jsonv1.DefaultOptionsV1), which,
// unlike encoding/json, does not build an encoder for every field type on
// first use. Anything else (broken JSON, a type mismatch, an integral
// number written as 5.0) is decoded again from scratch by decodeStd, so
// every error and every tolerated mismatch is encoding/json's own. The
// config tests hold both decoders to the same values (TestDecodersAgree,
// FuzzDecoders).
func decode[T any](src *source, v *T) error {
	if err := checkUTF8(src); err != nil {
		return err
	}
	if jsonv2.Unmarshal(src.raw, v, jsonv1.DefaultOptionsV1()) == nil {
		return nil
	}
	var zero T
	*v = zero
	return decodeStd(src, v)
}

// decodeStd is decode by encoding/json alone, for a file whose UTF-8 is
// already checked.
func decodeStd(src *source, v any) error {
	// Unmarshal checks the syntax of the whole text before it decodes
	// anything: broken JSON is a *json.SyntaxError, and v is untouched.
	err := json.Unmarshal(src.raw, v)
	if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
		// The offset is just past the offending byte; point at it, or
		// past the last byte when the input ended too early.
		off := int(se.Offset)
		if off > 0 && !strings.Contains(se.Error(), "end of JSON input") {
			off--
		}
		e := agenterr.Wrap(err, agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false,
			"%s is not valid JSON", src.file)
		e.File = src.file
		e.Line, e.Column = src.position(off)
		e.Hint = "fix the JSON syntax at this position (missing comma or quote, trailing comma, comment?)"
		return e
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// JSON Schema counts 5.0 and 1e2 as integers, Go's decoder does
		// not; rewrite integral numbers as integers and decode again, so a
		// value the schema accepts is never silently zero. What still
		// fails is a real type error, which the schema reports.
		d := json.NewDecoder(bytes.NewReader(src.raw))
		d.UseNumber()
		var tree any
		if d.Decode(&tree) == nil {
			if b, merr := json.Marshal(integralNumbers(tree)); merr == nil {
				err = json.Unmarshal(b, v)
			}
		}
	}
	if err != nil && !errors.As(err, &te) {
		e := agenterr.Wrap(err, agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false,
			"%s cannot be decoded", src.file)
		e.File = src.file
		return e
	}
	return nil
}

// typeMismatchTolerated is err, an error of json.Unmarshal inside an
// UnmarshalJSON method, with a type mismatch dropped: encoding/json
// decodes everything else before it reports one, but stops decoding the
// whole file at any error an UnmarshalJSON method returns, so a method
// that passed it on would leave every later value of the file at zero.
// The schema reports the mismatch.
func typeMismatchTolerated(err error) error {
	if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
		return nil
	}
	return err
}

// integralNumbers rewrites json.Numbers with an integral value written as a
// fraction or exponent ("5.0", "1e2") as plain integers.
func integralNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = integralNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = integralNumbers(e)
		}
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			f, err := strconv.ParseFloat(string(x), 64)
			if err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
				return json.Number(strconv.FormatInt(int64(f), 10))
			}
		}
	}
	return v
}

// insideDir returns "" when rel is a relative path that stays inside dir
// (also after resolving symlinks of the parts that exist), or a phrase
// saying why it does not.
func insideDir(dir, rel string) string {
	if rel == "" {
		return "is empty"
	}
	if strings.ContainsRune(rel, 0) {
		return "contains a NUL byte"
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, `\`) || filepath.VolumeName(rel) != "" {
		return "is absolute; it must be relative to the agent folder"
	}
	clean := filepath.Clean(filepath.FromSlash(rel))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "leaves the agent folder"
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	// Resolve the longest existing prefix of the path.
	p := filepath.Join(root, clean)
	for q := p; ; q = filepath.Dir(q) {
		if resolved, err := filepath.EvalSymlinks(q); err == nil {
			r, err := filepath.Rel(root, resolved)
			if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
				return "leaves the agent folder through a symbolic link"
			}
			return ""
		}
		if q == root || q == filepath.Dir(q) {
			return ""
		}
	}
}
