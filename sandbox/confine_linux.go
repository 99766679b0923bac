//go:build linux

package sandbox

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// closeInheritedFDs marks every descriptor above 2 close-on-exec, so none
// reaches the program: Landlock does not cover descriptors that are already
// open, and a caller's "7>host-file" or an inherited socket would otherwise
// cross every other boundary.
func closeInheritedFDs() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	for fd := 3; fd < 1<<16; fd++ { // kernels before 5.11
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return nil
}

// dropCapabilities leaves the process, and everything it executes, with
// no capability: the bounding and ambient sets are emptied, then the
// effective, permitted and inheritable sets. A root caller's program is
// uid 0 of its user namespace (so it owns the root-owned files it may
// write), and without this it would hold every capability there,
// CAP_DAC_OVERRIDE included.
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL && err != unix.EPERM {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// socketFilter is a seccomp program under which socket(2) creates only
// AF_INET and AF_INET6 sockets — every other family (AF_UNIX, AF_NETLINK,
// AF_PACKET, AF_VSOCK, AF_ALG, AF_KEY, …) is refused with EACCES — and
// io_uring_setup fails with ENOSYS (io_uring could open sockets outside
// the filter); every system call of a foreign ABI (x32, 32-bit compat),
// where the socket number differs, is refused too. A sandboxed program
// therefore reaches no UNIX socket at all — not a Docker socket, not an
// ssh-agent, not an abstract one — no netlink (routing, audit, uevents),
// no raw packets and no host over vsock, while socketpair(2) keeps
// working. The helper needs none of them once the filter is installed,
// right before exec. nil when the architecture is not supported.
func socketFilter() []unix.SockFilter {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil
	}
	const (
		offNr   = 0
		offArch = 4
		offArg0 = 16 // low 32 bits of args[0], little endian
		ldW     = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jgeK    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret     = unix.BPF_RET | unix.BPF_K
	)
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	eacces := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EACCES)
	enosys := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	return []unix.SockFilter{
		/* 0 */ {Code: ldW, K: offArch},
		/* 1 */ {Code: jeqK, K: arch, Jt: 1, Jf: 0},
		/* 2 */ {Code: ret, K: enosys},
		/* 3 */ {Code: ldW, K: offNr},
		/* 4 */ {Code: jgeK, K: 0x40000000, Jt: 0, Jf: 1}, // x32 system calls
		/* 5 */ {Code: ret, K: enosys},
		/* 6 */ {Code: jeqK, K: unix.SYS_IO_URING_SETUP, Jt: 0, Jf: 1},
		/* 7 */ {Code: ret, K: enosys},
		/* 8 */ {Code: jeqK, K: unix.SYS_SOCKET, Jt: 0, Jf: 4},
		/* 9 */ {Code: ldW, K: offArg0},
		/* 10 */ {Code: jeqK, K: unix.AF_INET, Jt: 2, Jf: 0},
		/* 11 */ {Code: jeqK, K: unix.AF_INET6, Jt: 1, Jf: 0},
		/* 12 */ {Code: ret, K: eacces},
		/* 13 */ {Code: ret, K: allow},
	}
}

// auditArch is the seccomp architecture of each supported GOARCH.
var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}

// installFilter loads filter for the calling thread (the one that will
// execve; no_new_privs must be set). It allocates nothing.
func installFilter(filter []unix.SockFilter) error {
	if len(filter) == 0 {
		return nil
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0)
}
