// Package proc is about the processes capstan starts: which program runs,
// the environment it gets, what of its output is redacted, and how
// capstan's own process is kept out of its reach and what it leaves behind
// is reaped. Nothing the model could have written is executed or obeyed.
//
// # Which program
//
//   - [LookPath] resolves a program (git, gh, the claude CLI and its
//     interpreter) to an absolute path once, before the model runs, and
//     refuses one that a PATH entry inside the work dir provides (a model
//     that writes .venv/bin/git must not have it run by the next capstan
//     run, outside the sandbox);
//   - [Git] runs git with a minimal environment (no key) and a
//     configuration the model cannot steer: no hooks, fsmonitor, filters,
//     textconv, external diff or merge drivers, signing or verification
//     programs, pager, editor, credential helper, ssh command or trace
//     output, whatever the repository's .git/config says, and no system or
//     global configuration file; [GitConfigEnv] gives the same pins to the
//     git commands of a command validator (git status in a git-clean
//     validator), and [Git.HiddenChanges] finds the uncommitted work git
//     status does not show.
//
// # The environment
//
// None of the processes capstan starts gets capstan's own environment:
// each gets an allow-list, so a credential no rule knows by name
// (PGPASSWORD, MYSQL_PWD, a DSN, a webhook URL, a password manager's
// session) is not passed rather than leaked.
//
//   - The model's commands — Bash, command validators, subprocess steps,
//     MCP servers — get [ForCommands]: the minimal base, the documented
//     toolchain variables of Go, Python, Node and Rust ([Toolchains]),
//     and the agent's runner.boundaries.env.
//   - git, run by capstan for itself, gets [Minimal] (plus what [Git]
//     pins).
//   - gh gets [ForGitHubCLI]: the minimal base, gh's own token and host
//     variables and the network settings.
//   - The claude CLI gets [ForClaudeCLI]: what commands get (its Bash runs
//     the model's commands), plus its provider settings and key.
//
// Secret values are never passed by a pattern, only by name (see
// [IsSecret]). capstan's own environment block — what
// /proc/<pid>/environ shows of it — keeps only what its children may get
// ([KeptInOwnBlock]). What the processes print passes through
// [RedactSecrets], [SecretRedactor], [StreamRedactor] or [RedactJSON]
// before the model, the journal or a transcript sees it.
//
// # Protection and reaping
//
// [ProtectSelf], called once at start-up, wipes the values of secret
// variables from the process's initial environment block (what
// /proc/<pid>/environ shows; Go keeps its own copy, so os.Getenv still
// works; the kernel may still let a same-uid process read that block, so
// the values must go), marks the process non-dumpable (so /proc/<pid>/mem,
// which holds Go's copy, is closed to same-uid processes), drops
// CAP_SYS_PTRACE from the capability bounding set of every thread (so
// children of a root capstan cannot override that), and marks every
// inherited descriptor above 2 close-on-exec (so no child inherits one by
// accident).
//
// [Supervise] runs a program under a supervisor: this binary re-executed
// as a child subreaper, which kills every descendant — including those
// that called setsid — when the program exits or the caller stops it. The
// supervisor needs [InitSupervisor] first thing in main (sandbox.Init
// calls it). Protection and the supervisor need Linux; on other systems
// (guard_other.go) [ProtectSelf] does nothing and [Supervise] returns an
// error.
package proc
