// Package testenv is the environment capstan's tests run in: the isolated
// directories a test binary uses instead of the user's, the git
// repositories tests read, the real programs some tests drive, a fake gh,
// and the CPU clock benchmarks report.
//
//   - [Run], called from a test package's TestMain, points capstan's state
//     directory (where run journals are kept), the user config directory
//     and the user cache directory at temporary directories, so tests
//     never write into the user's home nor read the user's own defaults,
//     and gives git a fixed identity and no global configuration
//     ([IsolateGitConfig]), so tests pass the same on a fresh machine (no
//     ~/.gitconfig) as on a developer's. [GoCommand] runs go with the
//     build cache the test binary was built with.
//   - [MakeGitRepo] builds git repositories with fixed authors and
//     timestamps (as net/http/httptest builds HTTP servers) for tests of
//     pipelines that read git history ([GitSteps]); [PoisonRepo] and
//     [Poison] build repositories whose configuration a model poisoned,
//     for tests that check capstan's own git runs none of it;
//     [TinyGitRepo] and [TinyGoModule] are the small work dirs of the
//     validator tests of verify and verdict ([MustRun], [WriteFile]).
//   - [ClaudeCLI] finds the real Claude Code CLI for the tests that drive
//     it against a loopback fake of the Anthropic API; CI installs
//     [ClaudeVersion], the version the skip message names.
//   - [InstallFakeGH] puts a stand-in for the GitHub CLI on PATH: a `gh`
//     that keeps issues, labels and comments in a state file, answers the
//     gh commands workflows use as gh does (same arguments, same output
//     shapes), appends every call to a log, and fails the calls a test
//     asks it to. It is the test binary itself, re-executed by a small
//     script, so a test package calls [FakeGHMain] first in its TestMain.
//   - [ProcessCPUTime] reads the CPU time the process has used, for
//     benchmarks that report CPU time rather than wall time: on a machine
//     shared with other work, the wall clock stretches with the other
//     processes' load, the CPU a piece of code spends much less so.
//
// The Temporal dev server is package internal/temporaltest: it needs the
// Temporal SDK, which every test binary importing this package would
// otherwise link.
package testenv
