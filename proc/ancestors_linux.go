//go:build linux

package proc

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Ancestor is a process above this one (its parent, the parent's parent,
// …) whose environment block holds a variable AncestorsHolding looks for.
type Ancestor struct {
	PID int
	// Command is the process's name (its comm).
	Command string
	// Vars names the variables found, sorted.
	Vars []string
}

func (a Ancestor) String() string {
	return fmt.Sprintf("process %d (%s)", a.PID, a.Command)
}

// AncestorsHolding walks from this process's parent up to the first
// process (or the first whose /proc entry cannot be read) and returns,
// nearest first, those whose environment block — what
// /proc/<pid>/environ shows, the environment the process was started
// with — holds a non-empty variable named in names or a variable whose
// value is one of values (empty values never match). A process the
// caller's rights cannot read is skipped; so can be what a program of the
// same rights could read.
func AncestorsHolding(names, values []string) []Ancestor {
	var out []Ancestor
	seen := map[int]bool{}
	for pid := os.Getppid(); pid > 0 && !seen[pid]; {
		seen[pid] = true
		comm, ppid, ok := statOf(pid)
		if !ok {
			break
		}
		if vars := holding(pid, names, values); len(vars) > 0 {
			out = append(out, Ancestor{PID: pid, Command: comm, Vars: vars})
		}
		pid = ppid
	}
	return out
}

// statOf reads a process's command name and parent from /proc/<pid>/stat.
func statOf(pid int) (comm string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return string(b[open+1 : end]), ppid, err == nil
}

// holding returns the variables of pid's environment block that match.
func holding(pid int, names, values []string) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil
	}
	var vars []string
	for entry := range bytes.SplitSeq(b, []byte{0}) {
		k, v, ok := bytes.Cut(entry, []byte("="))
		if !ok || len(v) == 0 {
			continue
		}
		name, value := string(k), string(v)
		if slices.Contains(names, name) || slices.Contains(values, value) {
			if !slices.Contains(vars, name) {
				vars = append(vars, name)
			}
		}
	}
	slices.Sort(vars)
	return vars
}
