package testfix

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
)

// WriteFolder writes cfg (from Config) as the equivalent agent folder dir:
// agent.json, steps_registry.json, the prompts, the schema and the script
// of a script model. `capstan validate dir` accepts it and `capstan run
// dir` runs the same agent. dir must not exist or be empty; the folder is
// written next to it and renamed into place, so a failure leaves no half
// folder.
func WriteFolder(cfg agent.Config, dir string) error {
	if cfg.Definition == nil || cfg.Registry == nil {
		return errors.New("write agent folder: the config has no Definition and Registry (build it with testfix.Config)")
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("write agent folder: %s is not empty", dir)
	} else if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
		return fmt.Errorf("write agent folder: %s is a file", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write agent folder: %w", err)
	}
	agentJSON, err := json.MarshalIndent(cfg.Definition, "", "  ")
	if err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	registryJSON, err := json.MarshalIndent(cfg.Registry, "", "  ")
	if err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	defined, err := agent.Define(cfg)
	if err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the temporary folder's name is no concern of the user's
		}
		return fmt.Errorf("write agent folder: cannot create a folder in %s: %w", parent, err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; what is left on failure
	write := func(name string, b []byte) error {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	}
	if err := write(agentdir.AgentFile, append(agentJSON, '\n')); err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	if err := write(agentdir.DefaultRegistryFile, append(registryJSON, '\n')); err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	fsys := defined.Agent.FS()
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return write(p, b)
	})
	if err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write agent folder: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("write agent folder: %w", err)
	}
	return nil
}

// StoreFolder writes cfg as an agent folder under parent, named by the
// digest of its files, and returns its path: the same agent is written
// once and found again, so that a run of it — journaled with the folder as
// its agent dir and the folder's files as its pinned definition — can be
// resumed and shown like a run of any agent folder. A folder already there
// with other files (altered) is replaced.
func StoreFolder(cfg agent.Config, parent string) (string, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("store the agent folder: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".new-")
	if err != nil {
		return "", fmt.Errorf("store the agent folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	written := filepath.Join(tmp, "agent")
	if err := WriteFolder(cfg, written); err != nil {
		return "", err
	}
	snap, err := agentdir.TakeSnapshot(written, agentdir.SnapshotOptions{Models: []string{cfg.Definition.Runner.Model}})
	if err != nil {
		return "", fmt.Errorf("store the agent folder: %w", err)
	}
	dir := filepath.Join(parent, "fix-"+strings.TrimPrefix(snap.Digest(), "sha256:")[:16])
	if have, err := agentdir.TakeSnapshot(dir, agentdir.SnapshotOptions{Models: []string{cfg.Definition.Runner.Model}}); err == nil && have.Digest() == snap.Digest() {
		return dir, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("store the agent folder: %w", err)
	}
	if err := os.Rename(written, dir); err != nil {
		// Another run of the same agent may have stored it first.
		if have, terr := agentdir.TakeSnapshot(dir, agentdir.SnapshotOptions{Models: []string{cfg.Definition.Runner.Model}}); terr == nil && have.Digest() == snap.Digest() {
			return dir, nil
		}
		return "", fmt.Errorf("store the agent folder: %w", err)
	}
	return dir, nil
}
