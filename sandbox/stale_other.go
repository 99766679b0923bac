//go:build !linux

package sandbox

import "os/exec"

// markOwned does nothing where runs leave no temporary directories to
// clean (RemoveStale is Linux's).
func markOwned(string) error { return nil }

// RemoveStale removes nothing off Linux; see the Linux version.
func RemoveStale(string) int { return 0 }

// removeStaleSeedBuilds removes nothing off Linux, as RemoveStale.
func removeStaleSeedBuilds(string) {}

// endsWithCapstan leaves cmd as it is: only Linux tells a child its
// parent died.
func endsWithCapstan(*exec.Cmd) {}
