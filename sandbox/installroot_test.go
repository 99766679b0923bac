package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInstallRoots follows the rule of InstallRoots on real layouts: a
// virtual environment, a node_modules folder, an /opt-like prefix, a
// program in ~/.local/bin or the home directory itself (the file alone),
// a key folder (nothing), the work dir (nothing beyond it), and an
// "#!/usr/bin/env NAME" interpreter found on PATH.
func TestInstallRoots(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	other := t.TempDir()
	work := t.TempDir()
	write := func(path, text string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	venv := filepath.Join(home, "venvs", "srv")
	write(filepath.Join(venv, "pyvenv.cfg"), "home = "+filepath.Join(other, "py", "bin")+"\n")
	venvProg := write(filepath.Join(venv, "bin", "srv"), "#!"+filepath.Join(venv, "bin", "python")+"\n")
	write(filepath.Join(other, "py", "bin", "python3"), "\x7fELF")
	nm := filepath.Join(other, "proj", "node_modules")
	script := write(filepath.Join(nm, "@scope", "pkg", "bin", "cli.js"), "#!/usr/bin/env mynode\n")
	if err := os.MkdirAll(filepath.Join(nm, ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(nm, ".bin", "cli")
	if err := os.Symlink(script, link); err != nil {
		t.Fatal(err)
	}
	nodeRoot := filepath.Join(other, "node-v22")
	write(filepath.Join(nodeRoot, "bin", "mynode"), "\x7fELF")
	opt := write(filepath.Join(other, "opt", "tool", "bin", "tool"), "\x7fELF")
	local := write(filepath.Join(home, ".local", "bin", "single"), "\x7fELF")
	inHome := write(filepath.Join(home, "bin", "mine"), "\x7fELF")
	key := write(filepath.Join(home, ".config", "tool", "bin", "x"), "\x7fELF")
	inWork := write(filepath.Join(work, ".venv", "bin", "srv"), "#!/bin/sh\n")
	write(filepath.Join(work, ".venv", "pyvenv.cfg"), "home = /usr/bin\n")
	path := filepath.Join(nodeRoot, "bin") + ":/usr/bin"

	for _, c := range []struct {
		name, prog string
		want       []string
	}{
		{"venv and its base interpreter", venvProg, []string{filepath.Join(other, "py"), venv}},
		{"node_modules and the env interpreter", link, []string{nm, nodeRoot}},
		{"opt prefix", opt, []string{filepath.Join(other, "opt", "tool")}},
		{"~/.local/bin: the file alone", local, []string{local}},
		{"~/bin: the file alone", inHome, []string{inHome}},
		{"key folder: nothing", key, nil},
		{"work dir: nothing", inWork, nil},
		{"system program: nothing", "/bin/sh", nil},
	} {
		slices.Sort(c.want)
		if got := InstallRoots(c.prog, path, work); !slices.Equal(got, c.want) {
			t.Errorf("%s: InstallRoots(%s) = %q, want %q", c.name, c.prog, got, c.want)
		}
	}
}
