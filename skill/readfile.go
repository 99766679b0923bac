package skill

import (
	"io"
	"os"

	"github.com/capstan-dev/capstan/internal/regularfile"
)

// readRegular reads the regular file at path. The model can create files
// in the build directory (a script it runs can), so a path may name a FIFO,
// a device or a directory: it is refused without blocking the run.
func readRegular(path string) ([]byte, error) {
	f, _, err := regularfile.Open(os.OpenFile, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
