// Package verify checks the world when a model claims it is done: the
// validators of steps_registry.json (command, file and custom, their
// output extractors and the failure patterns that name what went wrong),
// the protected files that must stay as they were when the run started,
// and the test baselines that catch a test lost (deleted, skipped, not
// collected) against the run's start. It reports what it found; deciding
// what that means for the run is package verdict's.
package verify
