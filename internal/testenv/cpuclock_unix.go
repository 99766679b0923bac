//go:build unix

package testenv

import (
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPUTime returns the CPU time (user and system, all threads) the process
// has used so far, with nanosecond resolution (CLOCK_PROCESS_CPUTIME_ID).
// It returns 0 where the clock cannot be read.
func ProcessCPUTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
