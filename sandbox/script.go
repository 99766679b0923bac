package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// scriptInterpreters maps the script extensions the sandbox accepts to the program
// that runs them. Scripts always run through their interpreter; exec bits and
// shebang lines are ignored.
var scriptInterpreters = map[string]string{
	".sh": "bash",
	".py": "python3",
	".js": "node",
}

// Interpreters maps the script extensions the sandbox accepts to the program
// that runs them. Scripts always run through their interpreter; exec bits and
// shebang lines are ignored.
// It returns a copy: changing it changes nothing else.
func Interpreters() map[string]string {
	return maps.Clone(scriptInterpreters)
}

// nodeAddressSpaceMB is the RLIMIT_AS floor for node, whose V8 engine
// reserves several GiB of virtual address space at start-up, and the
// default RLIMIT_AS of a run that no memory cgroup bounds.
const nodeAddressSpaceMB = 16384

// ScriptSpec describes one run of a skill's script: where it runs, what it
// may write and read, and the limits it runs under.
type ScriptSpec struct {
	// Root is the skill root: the working directory, readable, not writable.
	Root string
	// Build is the only writable directory; default Root/build (created
	// when missing). It must not be a symlink.
	Build string
	// Path is the script, relative to Root (".sh", ".py" or ".js").
	Path string
	// Args is the argument object. Its "argv" array (strings) becomes the
	// script's command-line arguments. Its "stdin" member is what the
	// script reads on standard input (a JSON string is passed raw, any
	// other value as JSON); without "stdin" the whole Args object is piped
	// as JSON, so scripts that read their arguments from stdin work too.
	Args json.RawMessage
	// Timeout is the wall-clock limit (default Limits.CPUSeconds + 5s).
	Timeout time.Duration
	// Limits are the rlimits (node gets at least 16 GiB of address space).
	Limits Limits
	// MaxStdout caps the kept standard output (default 1 MiB).
	MaxStdout int
	// WriteLimitMB bounds what the script may add to build/ (and its
	// private HOME/TMPDIR) while it runs; see Spec.WriteLimitMB.
	WriteLimitMB int
}

// ScriptResult is a Result plus the parsed output of a script.
type ScriptResult struct {
	Result
	// Script is the script path relative to the skill root.
	Script string `json:"script"`
	// Output is stdout parsed as JSON, when it is JSON.
	Output json.RawMessage `json:"output,omitempty"`
	// RawOutput is stdout as text when it is not JSON.
	RawOutput string `json:"raw_output,omitempty"`
	// Note explains how stdout was interpreted.
	Note string `json:"note,omitempty"`
	// BuildBytes is the growth of the build directory during the run.
	BuildBytes int64 `json:"build_bytes"`
}

// ScriptArgs is the conventional argument object of a script.
type ScriptArgs struct {
	Argv  []string        `json:"argv,omitempty"`
	Stdin json.RawMessage `json:"stdin,omitempty"`
}

// RunScript admits and runs a skill script: the extension must be allowed,
// the path must stay inside the skill root after resolving symlinks, and
// build/ must be a real directory. Failures of the script itself are in the
// ScriptResult; the error is for scripts that cannot be run at all (coded
// TOOL_INPUT, PATH_ESCAPE or SANDBOX_UNAVAILABLE).
func (r *Runner) RunScript(ctx context.Context, spec ScriptSpec) (ScriptResult, error) {
	root, err := filepath.Abs(spec.Root)
	if err != nil {
		return ScriptResult{}, err
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return ScriptResult{}, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, true, "skill root %q", spec.Root)
	}
	script, err := ResolveInside(root, spec.Path)
	if err != nil {
		return ScriptResult{}, err
	}
	ext := strings.ToLower(filepath.Ext(script))
	interp, ok := scriptInterpreters[ext]
	if !ok {
		e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "script %q: extension %q is not allowed", spec.Path, ext)
		e.Hint = "scripts must end in .sh, .py or .js"
		return ScriptResult{}, e
	}
	if fi, err := os.Stat(script); err != nil || !fi.Mode().IsRegular() {
		e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "script %q does not exist", spec.Path)
		e.Hint = "list the skill's files and pick an existing script"
		return ScriptResult{}, e
	}
	build := spec.Build
	if build == "" {
		build = filepath.Join(root, "build")
	}
	if err := ensureBuildDir(build); err != nil {
		return ScriptResult{}, err
	}
	argv, stdin, err := scriptIO(spec.Args)
	if err != nil {
		return ScriptResult{}, err
	}
	limits := spec.Limits.withDefaults()
	// Unset, the address-space limit is left to Run: none under a memory
	// cgroup, else the default, which node lives with.
	limits.AddressSpaceMB = spec.Limits.AddressSpaceMB
	if interp == "node" && limits.AddressSpaceMB > 0 && limits.AddressSpaceMB < nodeAddressSpaceMB {
		limits.AddressSpaceMB = nodeAddressSpaceMB
	}
	rel, _ := filepath.Rel(root, script)
	before := dirSize(build)
	res, err := r.Run(ctx, Spec{
		Argv:         append([]string{interp, rel}, argv...),
		Dir:          root,
		Writable:     []string{build},
		Stdin:        stdin,
		Timeout:      spec.Timeout,
		Limits:       limits,
		MaxStdout:    spec.MaxStdout,
		WriteLimitMB: spec.WriteLimitMB,
	})
	if err != nil {
		return ScriptResult{}, err
	}
	out := ScriptResult{Result: res, Script: filepath.ToSlash(rel), BuildBytes: dirSize(build) - before}
	trimmed := bytes.TrimSpace(res.Stdout)
	switch {
	case len(trimmed) == 0:
		out.Note = "the script printed nothing on stdout"
	case json.Valid(trimmed) && !res.StdoutTruncated:
		out.Output = json.RawMessage(trimmed)
	default:
		out.RawOutput = string(res.Stdout)
		out.Note = "stdout is not JSON; returned raw"
		if res.StdoutTruncated {
			out.Note = "stdout was truncated; returned raw"
		}
	}
	return out, nil
}

// scriptIO splits an argument object into argv and stdin bytes.
func scriptIO(args json.RawMessage) ([]string, []byte, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		return nil, []byte("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, nil, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, true, "script arguments must be a JSON object")
	}
	var argv []string
	if raw, ok := obj["argv"]; ok {
		if err := json.Unmarshal(raw, &argv); err != nil {
			return nil, nil, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, true, `"argv" must be an array of strings`)
		}
	}
	raw, ok := obj["stdin"]
	if !ok {
		return argv, []byte(args), nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return argv, []byte(s), nil
	}
	return argv, []byte(raw), nil
}

// ResolveInside resolves rel against root and checks that the result, with
// every symlink resolved, is still inside root. root must already be
// absolute and symlink-free. Absolute paths and paths that climb out with
// ".." are refused with PATH_ESCAPE; a path that does not exist yet is
// checked through its deepest existing parent.
func ResolveInside(root, rel string) (string, error) {
	escape := func(format string, args ...any) error {
		e := agenterr.New(agenterr.CodePathEscape, agenterr.LayerSandbox, true, format, args...)
		e.Hint = "use a path relative to the skill root that stays inside it"
		return e
	}
	if rel == "" {
		return "", escape("empty path")
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") {
		return "", escape("path %q is absolute", rel)
	}
	if strings.ContainsRune(rel, 0) {
		return "", escape("path %q contains a NUL byte", rel)
	}
	p := filepath.Join(root, filepath.FromSlash(rel))
	if !within(root, p) {
		return "", escape("path %q leaves the skill root", rel)
	}
	full, err := tool.EvalSymlinksPrefix(p)
	if err != nil {
		return "", escape("path %q: %v", rel, err)
	}
	if !within(root, full) {
		return "", escape("path %q resolves outside the skill root (symlink)", rel)
	}
	return full, nil
}

func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// ensureBuildDir creates dir if needed and refuses a symlink.
func ensureBuildDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create %s", dir)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "build directory %s", dir)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		e := agenterr.New(agenterr.CodePathEscape, agenterr.LayerSandbox, false, "build directory %s is a symlink or not a directory", dir)
		e.Hint = "remove it; capstan creates build/ itself"
		return e
	}
	return nil
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
