package verify

import (
	"io/fs"
	"syscall"
)

// changeTime is the status change time of info, in nanoseconds.
func changeTime(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 0
}
