//go:build !linux

package regularfile

// describeFlag is 0 where no open describes a file that cannot be opened
// for reading: such a file is then refused with the error of its open.
const describeFlag = 0
