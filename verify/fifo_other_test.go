//go:build !unix

package verify

import "errors"

func syscallMkfifo(string) error { return errors.New("no FIFOs on this platform") }
