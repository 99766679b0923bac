package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/proc"
)

// keyDirs are folders of a home directory that hold keys and credentials:
// no install root is one of them, inside one or holds one.
var keyDirs = []string{".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".claude", ".config", ".password-store",
	".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", ".local/share/keyrings"}

// InstallRoots returns what a program started at prog needs to read
// besides the system directories, read-only: the install root of the
// resolved executable and of the interpreter its "#!" line names (an
// "#!/usr/bin/env NAME" line is looked up on pathEnv, outside workDir).
// The install root of a file is
//
//   - for a file in a Python virtual environment (its bin/ folder next to
//     a pyvenv.cfg): the environment's folder, and the install root of the
//     interpreter it was made from (pyvenv.cfg's home);
//   - for a file inside a node_modules folder: the outermost node_modules
//     folder of its path (the package and the dependencies installed
//     beside it);
//   - for a file in a bin/ folder (/opt/tool/bin/x): that folder's parent,
//     unless the parent is the home directory, ~/.local or an ancestor of
//     the home directory: then the file alone;
//   - else the file alone.
//
// Roots under the system directories, under workDir (readable already),
// and roots that are the home directory, an ancestor of it, one of its
// key folders (~/.ssh, ~/.aws, ~/.config, …), inside one or holding one
// are left out. The result is sorted, without duplicates.
func InstallRoots(prog, pathEnv, workDir string) []string {
	home, _ := os.UserHomeDir()
	f := rootFinder{pathEnv: pathEnv, workDir: workDir, home: filepath.Clean(home), seen: map[string]bool{}}
	f.add(prog, 0)
	slices.Sort(f.roots)
	return slices.Compact(f.roots)
}

// rootFinder collects the install roots of a program and its
// interpreters.
type rootFinder struct {
	pathEnv, workDir, home string
	seen                   map[string]bool
	roots                  []string
}

// add collects the roots of prog and, up to a few levels, of the
// interpreter it names.
func (f *rootFinder) add(prog string, depth int) {
	if depth > 4 || prog == "" || !filepath.IsAbs(prog) || f.seen[prog] {
		return
	}
	f.seen[prog] = true
	prog = filepath.Clean(prog)
	if venv, ok := venvOf(prog); ok {
		f.keep(venv)
		if base := venvHome(venv); base != "" {
			f.add(filepath.Join(base, "python3"), depth+1)
		}
	}
	real, err := filepath.EvalSymlinks(prog)
	if err != nil {
		return
	}
	if venv, ok := venvOf(real); ok {
		f.keep(venv)
		if base := venvHome(venv); base != "" {
			f.add(filepath.Join(base, "python3"), depth+1)
		}
	}
	f.keep(f.rootOf(real))
	switch interp, env := shebang(real); {
	case interp == "":
	case env:
		if p, err := proc.LookPath(interp, f.pathEnv, f.workDir); err == nil {
			f.add(p, depth+1)
		}
	default:
		f.add(interp, depth+1)
	}
}

// rootOf is the install root of the resolved file real (see
// InstallRoots).
func (f *rootFinder) rootOf(real string) string {
	parts := strings.Split(real, string(filepath.Separator))
	if i := slices.Index(parts, "node_modules"); i > 0 {
		return strings.Join(parts[:i+1], string(filepath.Separator))
	}
	dir := filepath.Dir(real)
	if filepath.Base(dir) == "bin" {
		parent := filepath.Dir(dir)
		if !f.broad(parent) {
			return parent
		}
	}
	return real
}

// broad reports whether dir is too wide to make readable for a program:
// the root, the home directory or an ancestor of it, or ~/.local.
func (f *rootFinder) broad(dir string) bool {
	if dir == "/" || f.home != "" && (dir == f.home || under(f.home, []string{dir}) || dir == filepath.Join(f.home, ".local")) {
		return true
	}
	return false
}

// keep adds root unless it is left out (see InstallRoots).
func (f *rootFinder) keep(root string) {
	if root == "" || under(root, defaultSystemPaths) || f.broad(root) {
		return
	}
	if f.workDir != "" {
		if wd, err := filepath.EvalSymlinks(f.workDir); err == nil && under(root, []string{wd, f.workDir}) {
			return
		}
	}
	if f.home != "" {
		for _, k := range keyDirs {
			kd := filepath.Join(f.home, k)
			if under(root, []string{kd}) || under(kd, []string{root}) {
				return
			}
		}
	}
	f.roots = append(f.roots, root)
}

// venvOf reports the virtual environment whose bin/ folder holds p.
func venvOf(p string) (string, bool) {
	dir := filepath.Dir(p)
	if filepath.Base(dir) != "bin" {
		return "", false
	}
	venv := filepath.Dir(dir)
	if fi, err := os.Stat(filepath.Join(venv, "pyvenv.cfg")); err == nil && fi.Mode().IsRegular() {
		return venv, true
	}
	return "", false
}

// venvHome is the "home" of a virtual environment's pyvenv.cfg: the
// folder of the interpreter it was made from.
func venvHome(venv string) string {
	fh, err := os.Open(filepath.Join(venv, "pyvenv.cfg"))
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "home" {
			if h := strings.TrimSpace(v); filepath.IsAbs(h) {
				return filepath.Clean(h)
			}
		}
	}
	return ""
}

// ShebangFields returns the words of the "#!" line of the file at p
// ("#!/usr/bin/env node" is ["/usr/bin/env", "node"]), nil when it has
// none or cannot be read.
func ShebangFields(p string) []string {
	fh, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer fh.Close()
	head := make([]byte, 256)
	n, _ := fh.Read(head)
	line, _, _ := strings.Cut(string(head[:n]), "\n")
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return nil
	}
	return strings.Fields(rest)
}

// shebang reads the interpreter of a "#!" line: an absolute path, or the
// name an "#!/usr/bin/env NAME" line looks up (env set).
func shebang(p string) (interp string, env bool) {
	fields := ShebangFields(p)
	if len(fields) == 0 {
		return "", false
	}
	if filepath.Base(fields[0]) == "env" {
		for _, a := range fields[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
				return a, true
			}
		}
		return "", false
	}
	return fields[0], false
}
