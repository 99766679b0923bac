// Package lazyre compiles a package-level regular expression on its first
// use instead of at program start: every package capstan links runs its
// initializers on every start (`capstan --help` included), and compiling
// dozens of patterns there costs time and garbage that only the commands
// that use them should pay.
package lazyre

import (
	"regexp"
	"sync"
)

// all lists every pattern made by New, for MustCompileAll.
var (
	mu  sync.Mutex
	all []string
)

// New returns a function that compiles expr on its first call (panicking,
// like regexp.MustCompile, when expr is invalid) and returns the same
// *regexp.Regexp on every call. Use it for package-level variables:
//
//	var word = lazyre.New(`\w+`)
//	…
//	word().FindAllString(s, -1)
func New(expr string) func() *regexp.Regexp {
	mu.Lock()
	all = append(all, expr)
	mu.Unlock()
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// MustCompileAll compiles every pattern made by New so far and returns the
// first that is not valid, with its error. Tests call it so that a bad
// pattern fails the build's tests, as it failed at start when compiled
// eagerly.
func MustCompileAll() (expr string, err error) {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range all {
		if _, err := regexp.Compile(e); err != nil {
			return e, err
		}
	}
	return "", nil
}
