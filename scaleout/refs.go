package scaleout

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
)

// readRef resolves ref (a full name such as refs/heads/x, or HEAD) in the
// checkout dir by reading the repository's ref files — the loose ref, then
// packed-refs — instead of starting git for it; a worker resolves a few
// refs per iteration, and each git process costs more CPU than the
// iteration's own work for a short agent. It asks git (rev-parse) whenever
// the files do not answer plainly: a repository that is not in the files
// format, a symbolic ref other than HEAD's, a value that is not an object
// id. found is false when the ref does not exist.
//
// The files are the model's to write, as they are for git: readRef
// follows no link (guardRepo removed them from .git) and answers what git
// would read from the same files.
func (w *Activities) readRef(ctx context.Context, dir, ref string) (sha string, found bool, err error) {
	if sha, found, ok := refFromFiles(filepath.Join(dir, ".git"), ref); ok {
		return sha, found, nil
	}
	sha, err = w.checkoutGit(ctx, dir, "rev-parse", "-q", "--verify", ref)
	if err != nil {
		if _, serr := w.checkoutGit(ctx, dir, "rev-parse", "--git-dir"); serr != nil {
			return "", false, serr // not a repository: an error, not a missing ref
		}
		return "", false, nil
	}
	return sha, true, nil
}

// refFromFiles reads ref from the files of the repository at gitDir; ok
// is false when the files do not settle it (git must be asked).
func refFromFiles(gitDir, ref string) (sha string, found, ok bool) {
	if fi, err := os.Lstat(filepath.Join(gitDir, "refs")); err != nil || !fi.IsDir() {
		return "", false, false
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "reftable")); err == nil {
		return "", false, false // the reftable format
	}
	name := ref
	for range 2 { // HEAD, then the branch it names
		if !safeRefName(name) {
			return "", false, false
		}
		b, err := readPlain(filepath.Join(gitDir, filepath.FromSlash(name)))
		if err == nil {
			v := strings.TrimSpace(string(b))
			if target, sym := strings.CutPrefix(v, "ref: "); sym {
				if name != "HEAD" {
					return "", false, false
				}
				name = strings.TrimSpace(target)
				continue
			}
			if !objectID(v) {
				return "", false, false
			}
			return v, true, true
		}
		if !os.IsNotExist(err) {
			return "", false, false
		}
		if name == "HEAD" {
			return "", false, false
		}
		return packedRef(gitDir, name)
	}
	return "", false, false
}

// packedRef looks name up in gitDir's packed-refs.
func packedRef(gitDir, name string) (sha string, found, ok bool) {
	b, err := readPlain(filepath.Join(gitDir, "packed-refs"))
	if os.IsNotExist(err) {
		return "", false, true
	}
	if err != nil {
		return "", false, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		id, n, cut := strings.Cut(line, " ")
		if !cut {
			return "", false, false
		}
		if n == name {
			if !objectID(id) {
				return "", false, false
			}
			return id, true, true
		}
	}
	if sc.Err() != nil {
		return "", false, false
	}
	return "", false, true
}

// readPlain reads a regular file, never through a link.
func readPlain(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > 64<<20 {
		return nil, os.ErrInvalid
	}
	return os.ReadFile(path)
}

// safeRefName accepts HEAD and refs/... names without "..", empty or dot
// components.
func safeRefName(name string) bool {
	if name == "HEAD" {
		return true
	}
	if !strings.HasPrefix(name, "refs/") {
		return false
	}
	for part := range strings.SplitSeq(name, "/") {
		if part == "" || part == "." || part == ".." || strings.ContainsAny(part, "\\\x00") {
			return false
		}
	}
	return true
}

// objectID reports a full SHA-1 or SHA-256 object id in lower-case hex.
func objectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
