package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
)

// EnvStateDir is the environment variable that chooses capstan's state
// directory (where run journals are kept). Unset, it is
// $XDG_STATE_HOME/capstan, or ~/.local/state/capstan.
const EnvStateDir = "CAPSTAN_STATE_DIR"

// workDirFile, in a work dir's folder of the store, holds the work dir's
// absolute path.
const workDirFile = "workdir"

// StateDir returns capstan's state directory as getenv (nil = os.Getenv)
// configures it.
func StateDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv(EnvStateDir); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Errorf("journal: %s: %w", EnvStateDir, err)
		}
		return abs, nil
	}
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "capstan"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("journal: no state directory: set %s or HOME: %w", EnvStateDir, err)
		}
	}
	return filepath.Join(home, ".local", "state", "capstan"), nil
}

// Store keeps run journals outside the work dir, where the agent's tools
// (confined to the work dir) cannot edit or erase them:
// <Dir>/runs/<work dir key>/<run-id>/events.jsonl. The key is the work
// dir's base name and a hash of its absolute path.
type Store struct {
	// Dir is the state directory.
	Dir string
}

// OpenStore returns the Store in the state directory getenv configures.
func OpenStore(getenv func(string) string) (Store, error) {
	dir, err := StateDir(getenv)
	if err != nil {
		return Store{}, err
	}
	return Store{Dir: dir}, nil
}

// Run is one recorded run.
type Run struct {
	ID string
	// Path is the journal file.
	Path string
	// WorkDir is the work dir the run worked in ("" when unknown).
	WorkDir string
	// Legacy is true for a run kept under <workdir>/.capstan/runs (capstan
	// versions before the state directory, or an explicit journal dir).
	Legacy  bool
	Started time.Time
}

// runsRoot is where the store keeps every work dir's runs.
func (s Store) runsRoot() string { return filepath.Join(s.Dir, "runs") }

// WorkDirRuns is the store's folder for workDir's runs.
func (s Store) WorkDirRuns(workDir string) (string, error) {
	abs, err := filepath.Abs(workDir)
	if err != nil {
		return "", fmt.Errorf("journal: work dir: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, filepath.Base(abs))
	if len(name) > 40 {
		name = name[:40]
	}
	return filepath.Join(s.runsRoot(), strings.TrimLeft(name, ".")+"-"+hex.EncodeToString(sum[:6])), nil
}

// Create makes a new journal for runID of a run in workDir and returns a
// Writer for it. Folders are private to the user (0700).
func (s Store) Create(workDir, runID string) (*Writer, error) {
	if !validRunID(runID) {
		return nil, fmt.Errorf("journal: invalid run id %q", runID)
	}
	dir, err := s.WorkDirRuns(workDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", dir, err)
	}
	abs, _ := filepath.Abs(workDir)
	marker := filepath.Join(dir, workDirFile)
	if b, err := os.ReadFile(marker); err != nil || string(b) != abs+"\n" {
		if err := WriteFileAtomic(marker, []byte(abs+"\n")); err != nil {
			return nil, err
		}
	}
	return CreateFile(filepath.Join(dir, runID, FileName), 0o700)
}

// WriteFileAtomic replaces path with data through a temporary file in the
// same folder (mode 0600), so a kill never leaves it half written.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("journal: write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("journal: write %s: %w", path, err)
	}
	return nil
}

// List returns workDir's runs, newest first: those in the store and those
// an older capstan kept under <workDir>/.capstan/runs.
func (s Store) List(workDir string) ([]Run, error) {
	abs, err := filepath.Abs(workDir)
	if err != nil {
		return nil, fmt.Errorf("journal: work dir: %w", err)
	}
	dir, err := s.WorkDirRuns(abs)
	if err != nil {
		return nil, err
	}
	runs, err := listDir(dir, abs, false)
	if err != nil {
		return nil, err
	}
	legacy, err := listDir(filepath.Join(abs, RunsDir), abs, true)
	if err != nil {
		return nil, err
	}
	if len(legacy) > 0 {
		// A copy's run may be kept under another work dir (--journal-dir
		// elsewhere than where the pipeline ran).
		all, err := s.ListAll()
		if err != nil {
			return nil, err
		}
		legacy = withoutCopies(all, runs, legacy)
	}
	return sortRuns(append(runs, legacy...)), nil
}

// withoutCopies drops from legacy the runs already in listed and puts the
// store's run (store: every work dir's) in place of a copy of one:
// `capstan pipeline run --journal-dir` journals in the state directory and
// writes a copy where it was asked, and the state directory's journal,
// out of the agent's reach, is the one listed and shown.
func withoutCopies(store, listed, legacy []Run) []Run {
	if len(legacy) == 0 {
		return legacy
	}
	byID := make(map[string]Run, len(store))
	for _, r := range store {
		byID[r.ID] = r
	}
	seen := make(map[string]bool, len(listed))
	for _, r := range listed {
		seen[r.ID] = true
	}
	kept := legacy[:0:0]
	for _, r := range legacy {
		if seen[r.ID] {
			continue
		}
		if inStore, ok := byID[r.ID]; ok {
			r = inStore
		}
		seen[r.ID] = true
		kept = append(kept, r)
	}
	return kept
}

// ListAll returns the runs of every work dir in the store, newest first.
func (s Store) ListAll() ([]Run, error) {
	entries, err := os.ReadDir(s.runsRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: list %s: %w", s.runsRoot(), err)
	}
	var runs []Run
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(s.runsRoot(), e.Name())
		wd := ""
		if b, err := os.ReadFile(filepath.Join(dir, workDirFile)); err == nil {
			wd = strings.TrimSuffix(string(b), "\n")
		}
		more, err := listDir(dir, wd, false)
		if err != nil {
			return nil, err
		}
		runs = append(runs, more...)
	}
	return sortRuns(runs), nil
}

// Find resolves a run id, or a unique prefix of one, among every run in
// the store and the legacy runs under workDir ("" = none), so a run is
// found from any directory.
func (s Store) Find(workDir, id string) (Run, error) {
	if id == "" {
		return Run{}, errors.New("journal: empty run id")
	}
	runs, err := s.ListAll()
	if err != nil {
		return Run{}, err
	}
	if workDir != "" {
		abs, err := filepath.Abs(workDir)
		if err != nil {
			return Run{}, fmt.Errorf("journal: work dir: %w", err)
		}
		legacy, err := listDir(filepath.Join(abs, RunsDir), abs, true)
		if err != nil {
			return Run{}, err
		}
		runs = append(runs, withoutCopies(runs, runs, legacy)...)
	}
	var match []Run
	for _, r := range runs {
		if r.ID == id {
			return r, nil
		}
		if strings.HasPrefix(r.ID, id) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		e := &NoRunError{ID: id, Searched: []string{s.runsRoot()}}
		if workDir != "" {
			abs, _ := filepath.Abs(workDir) // made absolute above
			e.Searched = append(e.Searched, filepath.Join(abs, RunsDir))
		}
		return Run{}, e
	default:
		e := &NoRunError{ID: id, Searched: []string{s.runsRoot()}}
		for _, r := range match {
			e.Matches = append(e.Matches, r.ID)
		}
		return Run{}, e
	}
}

// NoRunError is Find's error when no run, or more than one, has the id
// or starts with it.
type NoRunError struct {
	// ID is the id that was looked for.
	ID string
	// Searched are the folders of runs looked in.
	Searched []string
	// Matches are the ids that start with ID when there is more than
	// one; empty when no run does.
	Matches []string
}

func (e *NoRunError) Error() string {
	if len(e.Matches) > 0 {
		return fmt.Sprintf("run id %q is ambiguous: %s", e.ID, strings.Join(e.Matches, ", "))
	}
	return fmt.Sprintf("no run %q in %s", e.ID, strings.Join(e.Searched, " or "))
}

// listDir lists the run folders in dir (missing = none). Under a work dir
// (legacy) nothing is read through a symbolic link: .capstan or runs
// being one lists no run, and a journal that is one is skipped.
func listDir(dir, workDir string, legacy bool) ([]Run, error) {
	if legacy && !realDirs(workDir, filepath.Dir(RunsDir), RunsDir) {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: list %s: %w", dir, err)
	}
	var runs []Run
	for _, e := range entries {
		if !e.IsDir() || strings.ContainsFunc(e.Name(), unicode.IsControl) {
			// A folder whose name holds control characters is no run
			// capstan made (Create refuses such an id): under a work dir
			// the agent could name one so, and runs would print it raw.
			continue
		}
		p := filepath.Join(dir, e.Name(), FileName)
		st, err := os.Lstat(p)
		if err != nil || legacy && !st.Mode().IsRegular() {
			continue
		}
		runs = append(runs, Run{ID: e.Name(), Path: p, WorkDir: workDir, Legacy: legacy, Started: st.ModTime()})
	}
	return runs, nil
}

func sortRuns(runs []Run) []Run {
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].ID > runs[j].ID })
	return runs
}

// List returns the runs kept under <dir>/.capstan/runs (see RunsDir),
// newest first.
func List(dir string) ([]Run, error) {
	runs, err := listDir(filepath.Join(dir, RunsDir), dir, true)
	return sortRuns(runs), err
}

// StartedFile is written next to a new run's journal before its first
// event: the agent the run was started with. A run killed before its
// run.start leaves an empty journal; StartedFile still names its agent
// and what starts it again.
const StartedFile = "started.json"

// Started is the content of StartedFile.
type Started struct {
	Agent    string `json:"agent"`
	AgentDir string `json:"agentDir"`
	WorkDir  string `json:"workDir"`
}

// WriteStarted writes the StartedFile of the run whose journal is at
// journalPath (one small write: a kill leaves all of it or none).
func WriteStarted(journalPath string, s Started) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(filepath.Dir(journalPath), StartedFile), data, 0o600)
}

// ReadStarted reads the StartedFile of the run whose journal is at
// journalPath; ok is false when there is none (older runs, or a kill
// before it was written).
func ReadStarted(journalPath string) (s Started, ok bool) {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(journalPath), StartedFile))
	if err != nil || len(data) > 64<<10 || json.Unmarshal(data, &s) != nil || s.Agent == "" {
		return Started{}, false
	}
	return s, true
}

// realDirs reports whether each of rels under base is a folder and not a
// symbolic link.
func realDirs(base string, rels ...string) bool {
	for _, rel := range rels {
		fi, err := os.Lstat(filepath.Join(base, rel))
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}
