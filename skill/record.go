package skill

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
)

// recordFile is where a run leaves what a later identical run may reuse.
const recordFile = ".capstan-act.json"

// runRecord is the cross-run memory of a build directory, which makes a
// repeated run cheap and its result the same: the outputs a completed run produced, keyed by the skill's
// content hash and the run's inputs, and the results of side-effect-free
// script runs keyed by script content and arguments.
type runRecord struct {
	SkillHash  string                `json:"skill_hash"`
	InputsHash string                `json:"inputs_hash"`
	Outputs    map[string]string     `json:"outputs"` // path → content hash
	Artifacts  []Artifact            `json:"artifacts"`
	Scripts    map[string]scriptMemo `json:"scripts"`
}

// scriptMemo is a successful script result that wrote nothing.
type scriptMemo struct {
	Output    json.RawMessage `json:"output,omitempty"`
	RawOutput string          `json:"raw_output,omitempty"`
	Note      string          `json:"note,omitempty"`
}

func loadRecord(build string) *runRecord {
	b, err := readRegular(filepath.Join(build, recordFile))
	if err != nil {
		return nil
	}
	var r runRecord
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

// inputsHash identifies the request: goal, constraints, inputs, expected.
func (s *session) inputsHash() string {
	b, _ := json.Marshal(struct {
		Goal        string
		Constraints []string
		Inputs      map[string]any
		Expected    []Expected
	}{s.in.Goal, s.in.Constraints, s.in.Inputs, s.in.Expected})
	return hashBytes(canonicalJSON(b))
}

// upToDate ends a run at once when an identical earlier run completed and
// its outputs are unchanged and still validate.
func (s *session) upToDate() *ActResult {
	p := s.prior
	if p == nil || len(s.in.Expected) == 0 || p.SkillHash != s.skillHash() || p.InputsHash != s.inputsHash() {
		return nil
	}
	for _, e := range s.in.Expected {
		want, ok := p.Outputs[e.Path]
		if !ok {
			return nil
		}
		full, err := s.resolveBuild(e.Path)
		if err != nil {
			return nil
		}
		b, err := readRegular(full)
		if err != nil || hashBytes(b) != want {
			return nil
		}
	}
	s.reusing = true
	if !s.validate().OK {
		s.reusing = false
		return nil
	}
	for i := range p.Artifacts {
		a := p.Artifacts[i]
		s.artifacts[a.Path] = &a
	}
	res := s.finish(ExitUpToDate, nil)
	res.Completed = true
	res.EvidenceSummary = append(res.EvidenceSummary, "outputs of an identical earlier run are unchanged and validate; nothing to do")
	return res
}

// saveRecord writes the record (temp file + rename). Outputs are recorded
// only for a completed run.
func (s *session) saveRecord(completed bool) {
	r := runRecord{SkillHash: s.skillHash(), InputsHash: s.inputsHash(), Outputs: map[string]string{}, Scripts: map[string]scriptMemo{}}
	if s.prior != nil && s.prior.Scripts != nil && s.prior.SkillHash == r.SkillHash {
		for k, v := range s.prior.Scripts {
			r.Scripts[k] = v
		}
	}
	for k, v := range s.scriptMemos {
		r.Scripts[k] = v
	}
	if completed {
		for _, e := range s.in.Expected {
			full, err := s.resolveBuild(e.Path)
			if err != nil {
				continue
			}
			if b, err := readRegular(full); err == nil {
				r.Outputs[e.Path] = hashBytes(b)
			}
		}
		r.Artifacts = s.artifactList()
		if s.prior != nil && len(r.Artifacts) == 0 {
			r.Artifacts = s.prior.Artifacts
		}
	}
	sort.Slice(r.Artifacts, func(i, j int) bool { return r.Artifacts[i].Path < r.Artifacts[j].Path })
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return
	}
	_ = writeFileAtomic(filepath.Join(s.build, recordFile), b)
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place, so a failure never leaves a half-written file.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
