package agentdir

import (
	"io/fs"

	"github.com/capstan-dev/capstan/agenterr"
)

// FromFiles makes a snapshot of files given in memory (path → content) —
// the prompts, schemas and scripts of an agent built from Go values. Paths
// are relative to the agent folder, "/"-separated and clean (fs.ValidPath);
// dir is what Dir reports ("" for an agent without a folder). The bounds of
// Take apply (DEFINITION_TOO_LARGE); an invalid path is CONFIG_INVALID.
// The snapshot keeps files as given: the caller must not change them.
func SnapshotFromFiles(dir string, files map[string][]byte) (*Snapshot, error) {
	if len(files) > MaxFiles {
		return nil, tooLarge("", "the definition has %d files, more than %d", len(files), MaxFiles)
	}
	var total int64
	for p, data := range files {
		if !fs.ValidPath(p) || p == "." {
			e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"file path %q is not a clean path relative to the agent folder", p)
			e.Hint = `write a "/"-separated relative path without "." or ".." elements, e.g. "prompts/steps/main/work/f_default.md"`
			return nil, e
		}
		if len(data) > MaxFileBytes {
			return nil, tooLarge(p, "%s has %d bytes, more than %d", p, len(data), MaxFileBytes)
		}
		total += int64(len(data))
	}
	if total > MaxTotalBytes {
		return nil, tooLarge("", "the definition's files have %d bytes, more than %d", total, MaxTotalBytes)
	}
	return newSnapshot(dir, files), nil
}
