// Package regularfile opens a file that must be a regular file without
// blocking on whatever else stands at its path.
//
// The model writes the work dir (and a script it runs can write more), so
// a path capstan reads may name a FIFO, a device or a directory. Opening a
// FIFO for reading blocks until something writes to it; Open opens with
// O_NONBLOCK, so it returns at once, and then checks the kind of what it
// opened through the same descriptor, so nothing can be swapped in between
// the check and the read.
package regularfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenFunc opens a file as os.OpenFile does; (*os.Root).OpenFile is one
// too, for reads confined to a directory.
type OpenFunc func(name string, flag int, perm fs.FileMode) (*os.File, error)

// NotRegularError is Open's refusal of something other than a regular
// file.
type NotRegularError struct {
	// Name is the path as given to Open.
	Name string
	// Info describes what stands there (Info.Mode().Type() is
	// fs.ModeDir, fs.ModeNamedPipe, ...).
	Info fs.FileInfo
}

func (e *NotRegularError) Error() string {
	if e.Info.IsDir() {
		return fmt.Sprintf("%s is a directory, not a regular file", e.Name)
	}
	return fmt.Sprintf("%s is not a regular file (%s)", e.Name, e.Info.Mode().Type())
}

// Open opens name for reading through open without blocking and returns
// it with its FileInfo, read from the open descriptor. What is not a
// regular file is closed again and refused with a *NotRegularError; an
// error of open itself (not found, a path escaping an os.Root) is returned
// as it is, for the caller to word. A Unix socket, which cannot be opened
// for reading at all (ENXIO), is described through an open that only
// describes (O_PATH on Linux) and refused the same way.
func Open(open OpenFunc, name string) (*os.File, fs.FileInfo, error) {
	f, err := open(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) && describeFlag != 0 {
			if d, derr := open(name, describeFlag, 0); derr == nil {
				fi, serr := d.Stat()
				d.Close()
				if serr == nil && !fi.Mode().IsRegular() {
					return nil, nil, &NotRegularError{Name: name, Info: fi}
				}
			}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Name: name, Info: fi}
	}
	return f, fi, nil
}
