//go:build linux

package sandbox

import (
	"fmt"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Access rights the sandbox grants, as defined by the kernel's Landlock
// interface.
const (
	llRead  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	llWrite = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
		ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSTruncate
	// llFileRights are the only rights the kernel accepts in a rule for
	// something that is not a directory.
	llFileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// landlockMaxABI is the newest Landlock ABI whose restrictions the sandbox
// uses: version 6 adds signal and abstract-socket scoping; later versions
// only add logging controls and rights the sandbox does not handle yet.
const landlockMaxABI = 6

// landlockHandled is everything the ruleset restricts on a kernel with
// Landlock ABI abi: all it can restrict up to landlockMaxABI, strictly (a
// kernel that refuses it fails the run, never a weaker ruleset). TCP
// bind/connect stay unhandled (allowed) when network is kept.
func landlockHandled(abi int, network bool) ll.RulesetAttr {
	// ABI 1: every right from execute to make_sym, truncate excepted.
	fs := uint64(llRead | llWrite&^ll.AccessFSTruncate)
	var a ll.RulesetAttr
	if abi >= 2 {
		fs |= ll.AccessFSRefer
	}
	if abi >= 3 {
		fs |= ll.AccessFSTruncate
	}
	if abi >= 4 && !network {
		a.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	if abi >= 5 {
		fs |= ll.AccessFSIoctlDev
	}
	if abi >= 6 {
		a.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	a.HandledAccessFS = fs
	return a
}

// landlockRule grants access beneath path (or to path itself when it is
// not a directory).
type landlockRule struct {
	path   string
	access uint64
	// optional paths that cannot be opened are skipped: a system path
	// missing on this machine.
	optional bool
	// dir rules must name a directory itself, not a symlink to one (the
	// writable directories, which the caller checked the same way).
	dir bool
}

// landlockRules lists the rules of hs. Read-only paths are optional;
// writable directories are required.
func landlockRules(hs helperSpec) []landlockRule {
	var rules []landlockRule
	for _, p := range hs.ReadOnly {
		rules = append(rules, landlockRule{path: p, access: llRead, optional: true})
	}
	for _, p := range hs.Writable {
		rules = append(rules, landlockRule{path: p, access: llRead | llWrite | ll.AccessFSRefer, dir: true})
	}
	if hs.OwnProc {
		rules = append(rules, landlockRule{path: "/proc", access: ll.AccessFSReadFile | ll.AccessFSReadDir, dir: true})
	}
	rules = append(rules, landlockRule{path: "/dev/null", access: llRead | llWrite | ll.AccessFSIoctlDev})
	for _, p := range []string{"/dev/zero", "/dev/urandom", "/dev/random"} {
		rules = append(rules, landlockRule{path: p, access: llRead, optional: true})
	}
	return rules
}

// restrictLandlock confines the calling thread with the rules of hs. It
// restricts that thread only, on purpose: stage two locks itself to one
// thread and execve's from it, and execve ends every other thread, so the
// program inherits exactly this thread's domain (the seccomp filter is
// installed the same way). Nothing but the configured paths is opened,
// so the outcome depends neither on how the Go program was built nor on
// which /proc is mounted.
func restrictLandlock(hs helperSpec) error {
	abi := min(hs.LandlockABI, landlockMaxABI)
	attr := landlockHandled(abi, hs.Network)
	rs, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("create the ruleset (ABI %d): %w", abi, err)
	}
	defer unix.Close(rs)
	for _, r := range landlockRules(hs) {
		if err := addLandlockRule(rs, r, attr.HandledAccessFS); err != nil {
			return err
		}
	}
	if hs.ProxyPort > 0 && attr.HandledAccessNet&ll.AccessNetConnectTCP != 0 {
		port := ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectTCP, Port: uint64(hs.ProxyPort)}
		if err := ll.LandlockAddNetPortRule(rs, &port, 0); err != nil {
			return fmt.Errorf("rule for the proxy port %d: %w", hs.ProxyPort, err)
		}
	}
	if err := ll.LandlockRestrictSelf(rs, 0); err != nil {
		return fmt.Errorf("enforce the ruleset: %w", err)
	}
	return nil
}

// addLandlockRule adds r to the ruleset rs, keeping only the rights the
// ruleset handles and, for anything but a directory, only file rights.
// The type is read from the descriptor the rule is made of, so it is the
// type of what the rule covers.
func addLandlockRule(rs int, r landlockRule, handled uint64) error {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if r.dir {
		flags |= unix.O_NOFOLLOW // a symlink opens as itself and is refused below
	}
	fd, err := unix.Open(r.path, flags, 0)
	if err != nil {
		if r.optional {
			return nil
		}
		return fmt.Errorf("rule for %s: open: %w", r.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("rule for %s: stat: %w", r.path, err)
	}
	access := r.access & handled
	switch isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR; {
	case r.dir && !isDir:
		return fmt.Errorf("rule for %s: not a directory", r.path)
	case !isDir:
		access &= llFileRights
	}
	attr := ll.PathBeneathAttr{AllowedAccess: access, ParentFd: fd}
	if err := ll.LandlockAddPathBeneathRule(rs, &attr, 0); err != nil {
		return fmt.Errorf("rule for %s (access %#x): %w", r.path, access, err)
	}
	return nil
}
