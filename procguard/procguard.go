// Package procguard keeps capstan's own process out of reach of the
// commands it starts on the model's behalf, and makes sure those commands
// leave nothing behind.
//
// [Protect], called once at start-up, wipes the values of secret
// variables from the process's initial environment block (what
// /proc/<pid>/environ shows; Go keeps its own copy, so os.Getenv still
// works; the kernel may still let a same-uid process read that block, so
// the values must go), marks the process non-dumpable (so /proc/<pid>/mem,
// which holds Go's copy, is closed to same-uid processes), drops
// CAP_SYS_PTRACE from the capability bounding set of every thread (so
// children of a root capstan cannot override that), and marks every inherited descriptor above 2 close-on-exec (so no
// child inherits one by accident).
//
// [Command] runs a program under a supervisor: this binary re-executed as
// a child subreaper, which kills every descendant — including those that
// called setsid — when the program exits or the caller stops it. The
// supervisor needs [Init] first thing in main (sandbox.Init calls it).
package procguard
