package proc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// HiddenChange is uncommitted work git status does not show.
type HiddenChange struct {
	// Path is relative to the repository's top level, "/"-separated.
	Path string
	// How says what hides it: "skip-worktree", "assume-unchanged" or
	// "info/exclude".
	How string
}

// Porcelain is h as a line of git status --porcelain would show it were
// it not hidden: " M path" for a changed tracked file (" D" when it is
// gone), "?? path" for an untracked one.
func (h HiddenChange) Porcelain(dir string) string {
	if h.How == "info/exclude" {
		return "?? " + h.Path
	}
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(h.Path))); err != nil {
		return " D " + h.Path
	}
	return " M " + h.Path
}

// HiddenChanges finds the uncommitted work in the repository at dir (its
// top level) that git status leaves out because the index or the
// repository's own files say so — all of which the model can set:
//
//   - a tracked file marked skip-worktree or assume-unchanged
//     (git update-index --skip-worktree / --assume-unchanged) whose
//     content differs from the index, or which is gone;
//   - an untracked file that only a pattern of .git/info/exclude hides
//     — a pattern not in baseExclude (the file as it was before the model
//     ran; nil: none) and not in a .gitignore.
//
// A repository without such marks and patterns yields nothing.
func (g *Git) HiddenChanges(ctx context.Context, dir string, baseExclude []byte) ([]HiddenChange, error) {
	var out []HiddenChange
	flagged, err := g.Output(ctx, dir, "ls-files", "-v", "-z")
	if err != nil {
		return nil, err
	}
	var marked []string
	how := map[string]string{}
	for entry := range strings.SplitSeq(string(flagged), "\x00") {
		if len(entry) < 3 {
			continue
		}
		tag, p := entry[0], entry[2:]
		switch {
		case tag == 'S' || tag == 's':
			how[p] = "skip-worktree"
		case tag >= 'a' && tag <= 'z':
			how[p] = "assume-unchanged"
		default:
			continue
		}
		marked = append(marked, p)
	}
	if len(marked) > 0 {
		staged, err := g.Output(ctx, dir, append([]string{"ls-files", "-s", "-z", "--"}, marked...)...)
		if err != nil {
			return nil, err
		}
		for entry := range strings.SplitSeq(string(staged), "\x00") {
			meta, p, ok := strings.Cut(entry, "\t")
			f := strings.Fields(meta)
			if !ok || len(f) < 2 || how[p] == "" {
				continue
			}
			full := filepath.Join(dir, filepath.FromSlash(p))
			if fi, err := os.Lstat(full); err != nil || !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
				out = append(out, HiddenChange{Path: p, How: how[p]})
				continue
			}
			now, err := g.Output(ctx, dir, "hash-object", "--no-filters", "--", p)
			if err != nil || strings.TrimSpace(string(now)) != f[1] {
				out = append(out, HiddenChange{Path: p, How: how[p]})
			}
		}
	}
	exclude, err := g.Output(ctx, dir, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude")
	if err != nil {
		return out, nil
	}
	current, err := os.ReadFile(strings.TrimSpace(string(exclude)))
	if err != nil || bytes.Equal(current, baseExclude) {
		return out, nil
	}
	// Untracked files the current info/exclude ignores, minus those the
	// .gitignore files or the exclude file as it was already ignore.
	byExclude, err := g.Output(ctx, dir, "ls-files", "-z", "--others", "--ignored", "--exclude-from="+strings.TrimSpace(string(exclude)))
	if err != nil {
		return out, nil
	}
	base, err := os.CreateTemp("", "capstan-exclude-")
	if err != nil {
		return out, err
	}
	defer os.Remove(base.Name())
	_, werr := base.Write(baseExclude)
	if cerr := base.Close(); werr != nil || cerr != nil {
		return out, nil
	}
	before, err := g.Output(ctx, dir, "ls-files", "-z", "--others", "--ignored", "--exclude-per-directory=.gitignore", "--exclude-from="+base.Name())
	if err != nil {
		return out, nil
	}
	already := strings.Split(string(before), "\x00")
	for p := range strings.SplitSeq(string(byExclude), "\x00") {
		if p != "" && !slices.Contains(already, p) {
			out = append(out, HiddenChange{Path: p, How: "info/exclude"})
		}
	}
	return out, nil
}

// GitInfoExclude reads dir's .git/info/exclude as it is now (nil when the
// work dir has no .git directory or the file does not exist): the
// baseline HiddenChanges compares with, read before the model runs.
func GitInfoExclude(dir string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, ".git", "info", "exclude"))
	if err != nil {
		return nil
	}
	return b
}
