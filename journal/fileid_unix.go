//go:build unix

package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileID identifies a file: its device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(f *os.File) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

func pathID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

func (a fileID) same(b fileID) bool { return a == b }

// linksOf returns how many names the open file f has (st_nlink of
// fstat(2) on its descriptor: no path lookup, no allocation). It drops to
// 0 when the file's last name is removed or another file is renamed over
// it.
func linksOf(f *os.File) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return uint64(st.Nlink), nil
}

// noFollow makes opening a path fail when it is a symbolic link.
const noFollow = unix.O_NOFOLLOW
