//go:build !linux

package proc

import "path/filepath"

// RealPath is p with every symbolic link resolved (filepath.EvalSymlinks).
func RealPath(p string) (string, error) { return filepath.EvalSymlinks(p) }
