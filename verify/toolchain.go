package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// PinnedToolchain is the configuration captured when a run started.
type PinnedToolchain struct {
	// Dir holds the copies (mode 0700); Remove deletes it.
	Dir string
	// Sources are the files copied, by variable ("GOENV" → the user's go
	// env file); a file that did not exist is copied as an empty one.
	Sources map[string]string
	vars    []string
	copies  map[string][]byte // copy path → content at capture
}

// Env returns the variables that name the copies ("GOENV=…"), for the
// validators' environment.
func (p *PinnedToolchain) Env() []string { return append([]string(nil), p.vars...) }

// Restore rewrites every copy with its content at capture.
func (p *PinnedToolchain) Restore() error {
	for path, data := range p.copies {
		// A copy replaced by a link or a directory goes first.
		if info, err := os.Lstat(path); err == nil && !info.Mode().IsRegular() {
			if err := os.RemoveAll(path); err != nil {
				return fmt.Errorf("toolchain configuration: %w", err)
			}
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("toolchain configuration: %w", err)
		}
	}
	return nil
}

// maxConfigBytes bounds one copied file.
const maxConfigBytes = 1 << 20

// CaptureToolchain copies the toolchain configuration that environ (the
// environment validators get) makes go and npm read, into a new directory
// under base ("" = the system temp dir). A tool that is not installed is
// left out. A variable environ already sets to "off" (GOENV=off) stays.
func CaptureToolchain(ctx context.Context, base string, environ []string) (*PinnedToolchain, error) {
	dir, err := os.MkdirTemp(base, "capstan-toolconf-")
	if err != nil {
		return nil, fmt.Errorf("toolchain configuration: %w", err)
	}
	p := &PinnedToolchain{Dir: dir, Sources: map[string]string{}, copies: map[string][]byte{}}
	fail := func(err error) (*PinnedToolchain, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if src, ok, err := goEnvFile(ctx, environ); err != nil {
		return fail(err)
	} else if ok {
		if err := p.pin("GOENV", src, "go.env"); err != nil {
			return fail(err)
		}
	}
	if src := npmUserConfig(environ); src != "" {
		if err := p.pin("npm_config_userconfig", src, "npmrc"); err != nil {
			return fail(err)
		}
	}
	if err := p.pinPip(environ); err != nil {
		return fail(err)
	}
	if userSiteEmpty(environ) {
		p.vars = append(p.vars, "PYTHONNOUSERSITE=1")
		p.Sources["PYTHONNOUSERSITE"] = "no user site-packages at the start"
	}
	return p, nil
}

// pinPip pins pip's configuration file: the one PIP_CONFIG_FILE names, or
// else the user's (pip.conf under $XDG_CONFIG_HOME/pip or ~/.config/pip,
// and the older ~/.pip/pip.conf), merged into one copy as pip reads them
// (a later file's keys win). pip reads no user file when PIP_CONFIG_FILE
// names an existing one, so the copy stands for all of them; with no file
// at all the copy is empty. Without HOME nothing is pinned.
func (p *PinnedToolchain) pinPip(environ []string) error {
	if v, ok := lookup(environ, "PIP_CONFIG_FILE"); ok && v != "" {
		if v == os.DevNull {
			return nil // pip reads no configuration at all
		}
		return p.pin("PIP_CONFIG_FILE", v, "pip.conf")
	}
	home, _ := lookup(environ, "HOME")
	if home == "" {
		return nil
	}
	xdg, _ := lookup(environ, "XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = filepath.Join(home, ".config")
	}
	files := []string{filepath.Join(home, ".pip", "pip.conf"), filepath.Join(xdg, "pip", "pip.conf")}
	var read [][]byte
	for _, f := range files {
		data, err := readBounded(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("toolchain configuration PIP_CONFIG_FILE (%s): %w", f, err)
		}
		read = append(read, data)
	}
	dst := filepath.Join(p.Dir, "pip.conf")
	data := mergeINI(read...)
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		return fmt.Errorf("toolchain configuration PIP_CONFIG_FILE: %w", err)
	}
	p.vars = append(p.vars, "PIP_CONFIG_FILE="+dst)
	p.Sources["PIP_CONFIG_FILE"] = strings.Join(files, " + ")
	p.copies[dst] = data
	return nil
}

// mergeINI merges INI files as pip's configuration reads them: sections in
// order of first appearance, and in each the keys of a later file replace
// those of an earlier one (a key's continuation lines go with it).
// Comments are dropped.
func mergeINI(files ...[]byte) []byte {
	if len(files) == 1 {
		return files[0]
	}
	type entry struct{ key, text string }
	var order []string
	sections := map[string][]entry{}
	for _, f := range files {
		section := ""
		last := -1
		for _, line := range strings.Split(string(f), "\n") {
			trimmed := strings.TrimSpace(line)
			switch {
			case trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";"):
				continue
			case strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]"):
				section = strings.TrimSpace(trimmed[1 : len(trimmed)-1])
				if _, ok := sections[section]; !ok {
					order = append(order, section)
					sections[section] = nil
				}
				last = -1
				continue
			case line != strings.TrimLeft(line, " \t") && last >= 0:
				sections[section][last].text += "\n" + line // a continuation line
				continue
			}
			key := trimmed // "key = value" or "key: value"
			if i := strings.IndexAny(trimmed, "=:"); i >= 0 {
				key = trimmed[:i]
			}
			key = strings.ToLower(strings.TrimSpace(key))
			if _, ok := sections[section]; !ok {
				order = append(order, section)
			}
			entries := sections[section]
			last = slices.IndexFunc(entries, func(e entry) bool { return e.key == key })
			if last < 0 {
				entries = append(entries, entry{key: key})
				last = len(entries) - 1
			}
			entries[last].text = line
			sections[section] = entries
		}
	}
	var b strings.Builder
	for _, name := range order {
		if name != "" {
			fmt.Fprintf(&b, "[%s]\n", name)
		}
		for _, e := range sections[name] {
			b.WriteString(e.text + "\n")
		}
	}
	return []byte(b.String())
}

// userSiteEmpty reports whether Python's user site-packages directories
// hold nothing: $PYTHONUSERBASE (default ~/.local) lib/python*/site-packages
// and, on macOS, ~/Library/Python/*/lib/python/site-packages. Turning them
// off then changes nothing the user had, and keeps out whatever the model
// puts there later. false when PYTHONNOUSERSITE is set already or there is
// no HOME (nothing to decide).
func userSiteEmpty(environ []string) bool {
	if v, ok := lookup(environ, "PYTHONNOUSERSITE"); ok && v != "" {
		return false
	}
	home, _ := lookup(environ, "HOME")
	base, _ := lookup(environ, "PYTHONUSERBASE")
	if base == "" {
		if home == "" {
			return false
		}
		base = filepath.Join(home, ".local")
	}
	patterns := []string{filepath.Join(base, "lib", "python*", "site-packages")}
	if home != "" {
		patterns = append(patterns, filepath.Join(home, "Library", "Python", "*", "lib", "python", "site-packages"))
	}
	for _, pat := range patterns {
		dirs, _ := filepath.Glob(pat)
		for _, d := range dirs {
			if entries, err := os.ReadDir(d); err != nil || len(entries) > 0 {
				return false // unreadable counts as not empty: leave it as it is
			}
		}
	}
	return true
}

// Fresh writes new copies of the captured configuration, with the content
// it had when captured, into a new directory under base ("" = the system
// temp dir): the clean run after the model's last turn reads files no
// earlier validator run could have changed. Remove the result when done.
func (p *PinnedToolchain) Fresh(base string) (*PinnedToolchain, error) {
	dir, err := os.MkdirTemp(base, "capstan-toolconf-")
	if err != nil {
		return nil, fmt.Errorf("toolchain configuration: %w", err)
	}
	q := &PinnedToolchain{Dir: dir, Sources: p.Sources, copies: map[string][]byte{}}
	renamed := map[string]string{}
	for old, data := range p.copies {
		dst := filepath.Join(dir, filepath.Base(old))
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("toolchain configuration: %w", err)
		}
		q.copies[dst], renamed[old] = data, dst
	}
	for _, kv := range p.vars {
		k, v, _ := strings.Cut(kv, "=")
		if dst, ok := renamed[v]; ok {
			v = dst
		}
		q.vars = append(q.vars, k+"="+v)
	}
	return q, nil
}

// Remove deletes the copies.
func (p *PinnedToolchain) Remove() error {
	if p == nil || p.Dir == "" {
		return nil
	}
	return os.RemoveAll(p.Dir)
}

// pin copies src (an empty file when it does not exist) to name in p.Dir
// and names the copy with variable key.
func (p *PinnedToolchain) pin(key, src, name string) error {
	data, err := readBounded(src)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("toolchain configuration %s (%s): %w", key, src, err)
	}
	dst := filepath.Join(p.Dir, name)
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		return fmt.Errorf("toolchain configuration %s: %w", key, err)
	}
	p.vars = append(p.vars, key+"="+dst)
	p.Sources[key] = src
	p.copies[dst] = data
	return nil
}

func readBounded(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if info.Size() > maxConfigBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	return os.ReadFile(path)
}

func lookup(environ []string, key string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// goEnvFile is the go env file the go command reads with environ (go env
// GOENV); ok is false when go is not installed or GOENV is off.
func goEnvFile(ctx context.Context, environ []string) (string, bool, error) {
	goBin, err := lookPath(environ, "go")
	if err != nil {
		return "", false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "env", "GOENV")
	cmd.Env = environ
	cmd.Dir = os.TempDir() // not the work dir: its go.mod/go.work must not choose the toolchain
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", false, fmt.Errorf("go env GOENV: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	f := strings.TrimSpace(out.String())
	if f == "" || f == "off" {
		return "", false, nil
	}
	return f, true, nil
}

// npmUserConfig is npm's user config file for environ: $npm_config_userconfig
// (any case), else $HOME/.npmrc; "" without either.
func npmUserConfig(environ []string) string {
	for _, k := range []string{"npm_config_userconfig", "NPM_CONFIG_USERCONFIG"} {
		if v, ok := lookup(environ, k); ok && v != "" {
			return v
		}
	}
	if home, ok := lookup(environ, "HOME"); ok && home != "" {
		return filepath.Join(home, ".npmrc")
	}
	return ""
}

// lookPath finds name on environ's PATH (absolute entries only: a
// relative one would be looked up in whatever directory capstan runs in).
func lookPath(environ []string, name string) (string, error) {
	path, _ := lookup(environ, "PATH")
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
