package agenterr

// Codes of the pinned agent definition (package definition). They live in
// their own file so that additions by other layers do not collide with them.
const (
	// CodeDefinitionTooLarge: an agent definition (one file, all files, or
	// the number of files) exceeds the bounds of a snapshot.
	CodeDefinitionTooLarge = "DEFINITION_TOO_LARGE"
	// CodeDefinitionMissing: a run's recorded definition snapshot is not
	// there (deleted, or the run was recorded without one), so it cannot be
	// resumed with the definition it started with.
	CodeDefinitionMissing = "DEFINITION_SNAPSHOT_MISSING"
	// CodeDefinitionMismatch: a run's recorded definition snapshot does not
	// match the digest its journal recorded (it was altered or damaged).
	CodeDefinitionMismatch = "DEFINITION_SNAPSHOT_MISMATCH"
)

// CodeDefinitionChanged: files a run would use that lie inside the work
// dir (the agent folder, an MCP server's command or script) changed since
// the last run recorded them, and the user has not accepted the change
// (--accept-changed-definition).
const CodeDefinitionChanged = "DEFINITION_CHANGED"
