package regularfile

import "golang.org/x/sys/unix"

// describeFlag opens a file only to describe it, whatever it is: a Unix
// socket, which cannot be opened for reading, included.
const describeFlag = unix.O_PATH
