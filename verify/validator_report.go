package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultReportCap bounds the report of one command validator run: the
// whole of what it printed to standard output, kept apart from the output
// cap so that a machine-readable test report (go test -json, jest --json,
// vitest --reporter=json, the JUnit XML capstan asks pytest for) is read in
// full however long it is.
const DefaultReportCap = 64 << 20

// pytestReport is what capstan adds to PYTEST_ADDOPTS of a command that
// runs pytest: its JUnit XML report, written to the command's standard
// output after the run, where capstan reads it as the report. The xunit1
// family names each case's file, from which the node id is exact whatever
// it holds.
const pytestReport = "--junitxml=/dev/stdout -o junit_family=xunit1"

// reportFiles are a validator's report files: one per validator name, in
// a directory capstan creates outside the work dir (0700), rewritten at
// each run and removed by Close.
type reportFiles struct {
	mu   sync.Mutex
	base string // where the directory is made ("" = the system temp dir)
	dir  string // made on first use
	n    map[string]int
}

// open truncates (or creates) the report file of validator name.
func (r *reportFiles) open(name string) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == "" {
		d, err := os.MkdirTemp(r.base, "capstan-reports-")
		if err != nil {
			return nil, fmt.Errorf("report directory: %w", err)
		}
		r.dir, r.n = d, map[string]int{}
	}
	i, ok := r.n[name]
	if !ok {
		i = len(r.n)
		r.n[name] = i
	}
	return os.OpenFile(filepath.Join(r.dir, fmt.Sprintf("%d.report", i)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

// close removes the directory.
func (r *reportFiles) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == "" {
		return nil
	}
	err := os.RemoveAll(r.dir)
	r.dir = ""
	return err
}

// boundedWriter writes at most left bytes to w and counts the rest; it
// never fails the command's output (a write error stops the report only).
type boundedWriter struct {
	w    *os.File
	left int64
	cut  bool
	err  error
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	n := len(p)
	if b.err != nil {
		return n, nil
	}
	if int64(len(p)) > b.left {
		p, b.cut = p[:b.left], true
	}
	if len(p) > 0 {
		if _, err := b.w.Write(p); err != nil {
			b.err = err
		}
		b.left -= int64(len(p))
	}
	return n, nil
}

// runsPytest reports whether a command names pytest.
func runsPytest(command string) bool { return strings.Contains(command, "pytest") }

// withPytestReport returns env with the JUnit report added to
// PYTEST_ADDOPTS (after what the environment already puts there).
func withPytestReport(env []string) []string {
	out := make([]string, 0, len(env)+1)
	add := pytestReport
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PYTEST_ADDOPTS="); ok {
			if strings.TrimSpace(v) != "" {
				add = v + " " + pytestReport
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PYTEST_ADDOPTS="+add)
}
