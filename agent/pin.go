package agent

import (
	"path/filepath"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/definition"
)

// pinDefinition stores the pinned definition the agent was loaded from
// (a definition.Snapshot behind config.Agent.FS) with the run record, next
// to the journal, and prepares what run.start records about it. An agent
// loaded from disk has nothing to pin.
func (a *Agent) pinDefinition() error {
	snap, ok := a.def.FS().(*definition.Snapshot)
	if !ok {
		return nil
	}
	if _, err := snap.Save(filepath.Dir(a.events.Path())); err != nil {
		return agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "store the agent definition with run %s", a.runID)
	}
	a.definition = snap
	a.snapshotRecord = snap.Record()
	a.snapshotRecord.Resume = a.opts.DefinitionResume
	return nil
}

// definitionDigest is the digest of the pinned definition, "" when none.
func (a *Agent) definitionDigest() string {
	if a.definition == nil {
		return ""
	}
	return a.definition.Digest()
}
