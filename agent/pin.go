package agent

import (
	"path/filepath"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// LoadPinned reads the agent folder dir once into a definition snapshot
// (with the script files of models, such as a --model override) and loads
// and validates the agent from it (agentdir.LoadAndValidateFS with
// ValidateOptions). A run built from the result reads nothing of dir
// afterwards and records the snapshot with its digests.
func LoadPinned(dir string, models ...string) (*agentdir.Agent, error) {
	return loadPinned(dir, ValidateOptions(), models)
}

func loadPinned(dir string, opts agentdir.ValidateOptions, models []string) (*agentdir.Agent, error) {
	snap, err := agentdir.TakeSnapshot(dir, agentdir.SnapshotOptions{Models: models})
	if err != nil {
		return nil, err
	}
	return agentdir.LoadAndValidateFS(snap, dir, opts)
}

// pinDefinition stores the pinned definition the agent was loaded from
// (an agentdir.Snapshot behind agentdir.Agent.FS) with the run record, next
// to the journal, and prepares what run.start records about it. An agent
// loaded from disk has nothing to pin, nor has one built from Go values
// (its snapshot holds its files but not its definition).
func (a *Agent) pinDefinition() error {
	snap, ok := a.def.FS().(*agentdir.Snapshot)
	if !ok || !snap.Has(agentdir.AgentFile) {
		return nil
	}
	if _, err := snap.Save(filepath.Dir(a.events.Path())); err != nil {
		return agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "store the agent definition with run %s", a.runID)
	}
	a.definition = snap
	return nil
}

// definitionRecord is what run.start says about the pinned definition
// (nil when none). It is made when run.start is written, so an agent does
// not keep a list of the definition's files while it runs.
func (a *Agent) definitionRecord() *agentdir.SnapshotRecord {
	if a.definition == nil {
		return nil
	}
	r := a.definition.Record()
	r.Resume = a.opts.DefinitionResume
	return r
}

// definitionDigest is the digest of the pinned definition, "" when none.
func (a *Agent) definitionDigest() string {
	if a.definition == nil {
		return ""
	}
	return a.definition.Digest()
}
