//go:build !unix

package completion

import "errors"

func syscallMkfifo(string) error { return errors.New("no FIFOs on this platform") }
