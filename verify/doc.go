// Package verify checks the world when a model claims it is done: the
// validators of steps_registry.json (command, file and custom, their
// output extractors and the failure patterns that name what went wrong),
// the protected files that must stay as they were when the run started,
// and the test baselines that catch a test lost (deleted, skipped, not
// collected) against the run's start. It reports what it found; deciding
// what that means for the run is package verdict's.
//
// # Hidden tests
//
// Tests the model never sees are listed in runner.verification.hidden:
// globs of files in the agent's own folder, which the run pins with the
// rest of the definition (outside the work dir). [LoadHidden] reads them
// into a [HiddenSet]. They are never in the work dir while the model acts:
// [HiddenSet.Place] writes them there only for the run of a test validator
// and its undo removes them (and puts back whatever the model had at those
// paths) before anything else happens.
//
// A test validator is run once with the files placed when the run starts,
// next to its ordinary baseline ([HiddenGuard.TakeBaseline]); the tests
// that run then and not without the files are the hidden tests. After
// every verification whose validators passed, [HiddenGuard] runs each such
// validator again with the files placed and fails verification (pattern
// hidden-tests-failed) unless every hidden test ran and passed. What the
// model is told is how many of them failed, never their names, output or
// contents; the journal's tests.hidden events ([event.HiddenResult]) name each
// hidden test and its outcome, so `capstan show` can list them.
//
// # The toolchain configuration validators run with
//
// A validator that runs unconfined keeps the user's HOME, and with it the
// files there that steer the toolchain: go's environment file (what `go
// env -w` writes: GOFLAGS=-exec=wrapper makes every test pass), npm's user
// config, pip's user config, and Python's user site-packages directory
// (where `pip install --user` puts a pytest plugin, and a .pth file runs
// code at every start of Python). The model's Bash can write those during
// the run. [CaptureToolchain] copies the files when the run starts into a
// directory of capstan's outside the work dir, and [PinnedToolchain.Env]
// names the copies to the validators (GOENV, npm_config_userconfig,
// PIP_CONFIG_FILE), so what is written to the originals later does not
// reach the tests. The copies are rewritten from memory before every
// validator run ([PinnedToolchain.Restore]), so a write to a copy does not
// last either. A user site-packages directory that held nothing at the
// start is turned off (PYTHONNOUSERSITE=1), so one made during the run is
// not read.
package verify
