package proc

import (
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RealPath is p with every symbolic link resolved, as
// filepath.EvalSymlinks returns it, for a path that exists. The kernel
// resolves it: p is opened with O_PATH (no read permission needed, no
// file content touched) and the descriptor's link under /proc/self/fd
// names the file it reached, in three system calls instead of an lstat of
// every element of p. A relative p, and a p this cannot answer for (no
// /proc, a name the kernel marks deleted), get EvalSymlinks' answer.
func RealPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return filepath.EvalSymlinks(p) // its answer stays relative
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return filepath.EvalSymlinks(p)
	}
	defer unix.Close(fd)
	var buf [1024]byte // a longer answer is EvalSymlinks'; this one stays on the stack
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil || n == 0 || n == len(buf) || buf[0] != '/' || strings.HasSuffix(string(buf[:n]), " (deleted)") {
		return filepath.EvalSymlinks(p)
	}
	return string(buf[:n]), nil
}
