package main

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// denyLandlock makes the kernel answer landlock_create_ruleset with
// ENOSYS for this process, every thread of it and everything it starts,
// as a kernel without Landlock does: a seccomp filter synchronised over
// all threads (TSYNC). The CLI tests run capstan under it to make a
// machine that cannot sandbox for real.
func denyLandlock() {
	arch := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	filter := []unix.SockFilter{
		{Code: ldW, K: 4}, // arch
		{Code: jeqK, K: arch, Jt: 0, Jf: 3},
		{Code: ldW, K: 0}, // system call number
		{Code: jeqK, K: unix.SYS_LANDLOCK_CREATE_RULESET, Jt: 0, Jf: 1},
		{Code: ret, K: uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		panic(errno)
	}
}
