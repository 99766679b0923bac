package agentdir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

// Watched is what capstan records, when a run starts, of the files a later
// run of the same agent in the same work dir will use although the model
// could have changed them: the agent definition when its folder lies
// inside the work dir, and the command and script files of stdio MCP
// servers that lie inside it (capstan starts those servers itself). The
// record is kept in capstan's state directory, out of the model's reach;
// the next run compares the files on disk with it and refuses a change
// the user has not accepted.
type Watched struct {
	// AgentDir and WorkDir are the absolute folders the record is for.
	AgentDir string `json:"agentDir"`
	WorkDir  string `json:"workDir"`
	// Definition holds the definition's files (paths relative to the agent
	// folder) when the agent folder is inside the work dir; nil otherwise.
	Definition map[string]WatchedFile `json:"definition,omitempty"`
	// Servers holds the MCP servers' files inside the work dir, by
	// absolute path.
	Servers map[string]WatchedFile `json:"servers,omitempty"`
}

// WatchedFile is one recorded file.
type WatchedFile struct {
	// Digest is "sha256:" and the hex SHA-256 of the content.
	Digest string `json:"digest"`
	// Text is the content of a small UTF-8 text file (at most
	// MaxWatchedText bytes), kept to show what changed.
	Text *string `json:"text,omitempty"`
	// Server names the MCP server that uses the file (Servers only).
	Server string `json:"server,omitempty"`
}

// MaxWatchedText bounds the content a Watched record keeps of a file to
// show its diff; larger or binary files are compared by digest only.
const MaxWatchedText = 64 << 10

// WatchedChange is one difference between a recorded Watched and the
// files now.
type WatchedChange struct {
	// Kind is Added, Removed or Modified.
	Kind string
	// Path is the file (relative to the agent folder for the definition,
	// absolute for a server file).
	Path string
	// Server names the MCP server a server file belongs to.
	Server string
	// Diff is a unified diff of the text, when both versions were kept.
	Diff string
}

// Watch works out what a run of the agent whose definition is snap, in
// workDir, must record: snap's files when its folder is inside workDir, and
// the files of the stdio MCP servers that are inside workDir (a bare
// server command is looked up on capstan's PATH). A result with nothing
// the model could write has Empty true.
func Watch(snap *Snapshot, workDir string, servers map[string]tooldecl.MCPServer) (*Watched, error) {
	work, err := realAbs(workDir)
	if err != nil {
		return nil, fmt.Errorf("definition: work dir: %w", err)
	}
	agentDir, err := realAbs(snap.Dir())
	if err != nil {
		return nil, fmt.Errorf("definition: agent folder: %w", err)
	}
	w := &Watched{AgentDir: agentDir, WorkDir: work}
	if isInside(work, agentDir) {
		w.Definition = make(map[string]WatchedFile, len(snap.list))
		for _, f := range snap.list {
			wf := WatchedFile{Digest: f.Digest}
			wf.Text = keptText(snap.files[f.Path].data)
			w.Definition[f.Path] = wf
		}
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		if s.Command == "" {
			continue
		}
		for _, p := range serverFiles(s, work) {
			wf, err := watchFile(p)
			if err != nil {
				return nil, fmt.Errorf("definition: MCP server %s: %w", name, err)
			}
			wf.Server = name
			if w.Servers == nil {
				w.Servers = map[string]WatchedFile{}
			}
			w.Servers[p] = wf
		}
	}
	return w, nil
}

// Empty reports that nothing of the run is model-writable.
func (w *Watched) Empty() bool { return w.Definition == nil && len(w.Servers) == 0 }

// serverFiles are the files of a stdio server inside work: its command
// (a bare name is looked up on PATH, a relative path is relative to the
// work dir, where servers start) and every argument naming an existing
// file there (a script the interpreter runs).
func serverFiles(s tooldecl.MCPServer, work string) []string {
	var files []string
	add := func(p string) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(work, p)
		}
		p = filepath.Clean(p)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			return
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return
		}
		// A link inside the work dir counts (the model can point it
		// elsewhere), and so does a file inside it reached through a
		// link outside.
		at := p
		if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			at = filepath.Join(dir, filepath.Base(p))
		}
		if (isInside(work, at) || isInside(work, real)) && !slices.Contains(files, p) {
			files = append(files, p)
		}
	}
	if strings.ContainsRune(s.Command, filepath.Separator) {
		add(s.Command)
	} else if found, err := exec.LookPath(s.Command); err == nil {
		add(found)
	}
	for _, a := range s.Args {
		if a != "" && !strings.HasPrefix(a, "-") {
			add(a)
		}
	}
	return files
}

// watchFile digests one file (and keeps its text when small).
func watchFile(p string) (WatchedFile, error) {
	f, err := os.Open(p)
	if err != nil {
		return WatchedFile{}, err
	}
	defer f.Close()
	h := sha256.New()
	head := make([]byte, 0, 4096)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := f.Read(buf)
		h.Write(buf[:n])
		if len(head) <= MaxWatchedText {
			head = append(head, buf[:n]...)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return WatchedFile{}, rerr
		}
	}
	return WatchedFile{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Text: keptText(head)}, nil
}

// keptText is data as text when it is small UTF-8 text, else nil.
func keptText(data []byte) *string {
	if len(data) > MaxWatchedText || !utf8.Valid(data) || slices.Contains(data, 0) {
		return nil
	}
	s := string(data)
	return &s
}

// Compare lists how now differs from the recorded w. The definition is
// compared when both have it; server files are compared where both
// recorded the same file (a server added or removed is a change of the
// definition, or of a definition outside the work dir, which the user
// wrote).
func (w *Watched) Compare(now *Watched) []WatchedChange {
	var out []WatchedChange
	if w.Definition != nil && now.Definition != nil {
		for _, p := range slices.Sorted(maps.Keys(w.Definition)) {
			old := w.Definition[p]
			cur, ok := now.Definition[p]
			switch {
			case !ok:
				out = append(out, WatchedChange{Kind: Removed, Path: p, Diff: textDiff(p, old.Text, nil)})
			case cur.Digest != old.Digest:
				out = append(out, WatchedChange{Kind: Modified, Path: p, Diff: textDiff(p, old.Text, cur.Text)})
			}
		}
		for _, p := range slices.Sorted(maps.Keys(now.Definition)) {
			if _, ok := w.Definition[p]; !ok {
				out = append(out, WatchedChange{Kind: Added, Path: p, Diff: textDiff(p, nil, now.Definition[p].Text)})
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(w.Servers)) {
		old := w.Servers[p]
		if cur, ok := now.Servers[p]; ok && cur.Digest != old.Digest {
			out = append(out, WatchedChange{Kind: Modified, Path: p, Server: cur.Server, Diff: textDiff(p, old.Text, cur.Text)})
		}
	}
	return out
}

// textDiff is a unified diff from old to cur ("" when either side was not
// kept as text; a missing side is empty).
func textDiff(name string, old, cur *string) string {
	empty := ""
	if old == nil && cur == nil {
		return ""
	}
	if old == nil {
		old = &empty
	}
	if cur == nil {
		cur = &empty
	}
	return udiff.Unified("recorded/"+name, "now/"+name, *old, *cur)
}

// WatchedFile names the file of the state directory stateDir that keeps
// the Watched record of agentDir run in workDir.
func watchedPath(stateDir, agentDir, workDir string) string {
	sum := sha256.Sum256([]byte(agentDir + "\x00" + workDir))
	return filepath.Join(stateDir, "definitions", hex.EncodeToString(sum[:12])+".json")
}

// LoadWatched reads the record of the agent folder and work dir of now from
// stateDir; it returns nil and no error when there is none.
func LoadWatched(stateDir string, now *Watched) (*Watched, error) {
	b, err := os.ReadFile(watchedPath(stateDir, now.AgentDir, now.WorkDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("definition: read the recorded definition: %w", err)
	}
	var w Watched
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("definition: read the recorded definition %s: %w", watchedPath(stateDir, now.AgentDir, now.WorkDir), err)
	}
	return &w, nil
}

// Save records w in stateDir (mode 0600, written whole or not at all).
func (w *Watched) Save(stateDir string) error {
	p := watchedPath(stateDir, w.AgentDir, w.WorkDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("definition: record the definition: %w", err)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("definition: record the definition: %w", err)
	}
	if err := journal.WriteFileAtomic(p, b); err != nil {
		return fmt.Errorf("definition: record the definition: %w", err)
	}
	return nil
}

// ChangedError is the error of a run refused because files the model
// could write changed since the last run recorded them.
func ChangedError(w *Watched, changes []WatchedChange, accept string) error {
	what, it := "the agent definition", "it"
	for _, c := range changes {
		if c.Server != "" {
			what, it = "files capstan runs for this agent", "them"
			break
		}
	}
	e := agenterr.New(agenterr.CodeDefinitionChanged, agenterr.LayerConfiguration, false,
		"%s changed since the last run recorded %s (%d file(s), shown above): the agent folder %s or its MCP server files lie inside the work dir %s, where a model could have changed them",
		what, it, len(changes), w.AgentDir, w.WorkDir)
	e.Hint = "review the changes; if you made them, accept them with: " + accept
	return e
}

// realAbs is p absolute with its symbolic links resolved (as far as it
// exists).
func realAbs(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil
}

// isInside reports whether p is dir or inside it.
func isInside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
