package skill

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// readRegular reads the regular file at path. The model can create files
// in the build directory (a script it runs can), so a path may name a FIFO,
// a device or a directory: opening a FIFO for reading would block the run
// until someone writes to it. The file is opened without blocking and
// refused unless it is a regular file.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return io.ReadAll(f)
}
