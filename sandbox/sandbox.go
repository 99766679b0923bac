// Package sandbox runs untrusted child processes — skill scripts, validator
// commands, the Bash tool of sandboxed agents — confined on Linux by user,
// network, PID, mount, IPC and UTS namespaces, resource limits (rlimits) and
// Landlock.
//
// A sandboxed run re-executes the current binary as a helper, so every
// program that uses this package must call [Init] first thing in main (and in
// TestMain for tests):
//
//	func main() {
//		sandbox.Init() // returns at once unless this process is a sandbox helper
//		...
//	}
//
// The helper runs in two stages. Stage one is PID 1 of a fresh PID namespace
// inside fresh user, network, mount, IPC and UTS namespaces; it starts stage
// two, waits for it and reports how it ended on a private pipe. Stage two sets
// the rlimits (CPU seconds, address space, processes, file size, open files,
// no core dumps), sets no_new_privs, restricts itself with Landlock (read-only
// system directories and the read-only roots the caller names, read-write only
// the writable directories, no TCP) and replaces itself with the target
// program. When stage one exits the kernel kills everything left in the PID
// namespace, so no process outlives a run.
//
// [Probe] reports what the machine allows. When namespaces cannot be created
// a [Runner] refuses to run anything (SANDBOX_UNAVAILABLE, with a hint naming
// the setting to change) unless its Config sets AllowUnsandboxed, in which case
// runs are confined by rlimits and Landlock only and the Result says so.
package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Limits are the resource limits of one run. Zero fields take the defaults
// of [DefaultLimits].
type Limits struct {
	// CPUSeconds is RLIMIT_CPU: the soft limit sends SIGXCPU, the hard limit
	// (one second later) SIGKILL.
	CPUSeconds int `json:"cpu_seconds,omitempty"`
	// AddressSpaceMB is RLIMIT_AS, the address space of each process.
	// Left zero it applies only when no memory cgroup bounds the run
	// (MemoryMB is then enforced by the kernel), with the default of
	// DefaultLimits, which the Go, Node and Python toolchains live with;
	// set, it always applies.
	AddressSpaceMB int `json:"address_space_mb,omitempty"`
	// Processes bounds the tasks (threads count too) of the tree: pids.max of
	// its pids cgroup when one can be made, else RLIMIT_NPROC and a watchdog.
	Processes int `json:"processes,omitempty"`
	// FileSizeMB is RLIMIT_FSIZE, the largest file the program may write.
	FileSizeMB int `json:"file_size_mb,omitempty"`
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int `json:"open_files,omitempty"`
	// MemoryMB bounds the memory of the whole process tree: the limit of
	// the run's memory cgroup when one can be made (the kernel reclaims
	// or kills inside the tree), else the resident memory summed over its
	// processes, sampled every 50 ms. The tree is killed when it is
	// exceeded (StatusMemoryLimit).
	MemoryMB int `json:"memory_mb,omitempty"`
}

// defaultLimits are the limits used for zero Limits fields.
var defaultLimits = Limits{CPUSeconds: 20, AddressSpaceMB: nodeAddressSpaceMB, Processes: 64, FileSizeMB: 50, OpenFiles: 256, MemoryMB: 1024}

// DefaultLimits are the limits used for zero Limits fields.
// It returns a copy: changing it changes nothing else.
func DefaultLimits() Limits {
	return defaultLimits
}

func (l Limits) withDefaults() Limits {
	d := defaultLimits
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = d.CPUSeconds
	}
	if l.AddressSpaceMB <= 0 {
		l.AddressSpaceMB = d.AddressSpaceMB
	}
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	if l.FileSizeMB <= 0 {
		l.FileSizeMB = d.FileSizeMB
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.MemoryMB <= 0 {
		l.MemoryMB = d.MemoryMB
	}
	return l
}

// Spec describes one sandboxed run.
type Spec struct {
	// Argv is the program and its arguments. Argv[0] is an absolute path or
	// a name looked up in the sandbox's PATH (system directories only).
	Argv []string
	// Dir is the working directory. It is readable; it is writable only if
	// it is (inside) one of Writable.
	Dir string
	// ReadOnly lists extra files or directories the program may read
	// (besides the system directories and Dir).
	ReadOnly []string
	// Writable lists the directories the program may write; everything else
	// is read-only or invisible. Each must exist and must not be a symlink.
	Writable []string
	// Env adds KEY=VALUE entries to the minimal environment (PATH, LANG,
	// HOME and TMPDIR are set by the runner; HOME and TMPDIR are a private
	// temporary directory removed after the run and cannot be overridden).
	Env []string
	// ReplaceEnv makes Env the whole environment (except HOME and TMPDIR).
	ReplaceEnv bool
	// CombinedOutput sends stdout and stderr, interleaved as written, to
	// Result.Stdout. Beyond MaxStdout bytes the middle is dropped (the run
	// goes on); beyond 256 MiB in total the process tree is killed
	// (StatusOutputLimit).
	CombinedOutput bool
	// Stdin is fed to the program's standard input.
	Stdin []byte
	// StdinStream, when set, is the program's standard input instead of
	// Stdin (an *os.File, such as the read end of a pipe, is given to the
	// program as it is).
	StdinStream io.Reader
	// Timeout is the wall-clock limit; 0 means Limits.CPUSeconds + 5s. The
	// whole process tree is killed when it expires.
	Timeout time.Duration
	// Limits are the rlimits of the run.
	Limits Limits
	// WriteLimitMB, when > 0, bounds the bytes the run adds to its
	// writable directories (its private HOME/TMPDIR included), checked
	// every 50 ms while it runs: past it the tree is killed, the files
	// written during the run are removed and the status is
	// StatusDiskLimit. RLIMIT_FSIZE is lowered to it as well, so no single
	// file grows past it.
	WriteLimitMB int
	// MaxStdout and MaxStderr cap the bytes kept from each stream (defaults
	// 1 MiB and 256 KiB). A program that prints more than MaxStdout is killed
	// and the run ends with StatusOutputLimit.
	MaxStdout int
	MaxStderr int
	// Stdout and Stderr, when set, receive the program's streams as they
	// are written: the writer decides what to keep, and printing much does
	// not end the run (MaxStdout does not apply; Result.Stdout stays
	// empty). Result.Stderr is still the summary of standard error. A
	// writer that fails stops the copy of its stream. Not with
	// CombinedOutput.
	Stdout io.Writer
	Stderr io.Writer

	// cacheLayer, when set, is the private copy of a sealed Cache the run
	// gets (Cache.apply); the helper puts it in place before the program
	// starts.
	cacheLayer *cacheLayer
}

// Status classifies how a run ended.
type Status string

// Run statuses.
const (
	StatusOK           Status = "ok"             // exit code 0
	StatusExit         Status = "exit"           // non-zero exit code
	StatusTimeout      Status = "timeout"        // wall-clock limit reached, process tree killed
	StatusCPULimit     Status = "cpu_limit"      // RLIMIT_CPU reached (SIGXCPU / SIGKILL), or the wall limit reached while the tree used its whole CPU allowance
	StatusMemoryLimit  Status = "memory_limit"   // tree over Limits.MemoryMB, or an allocation refused under RLIMIT_AS
	StatusDiskLimit    Status = "disk_limit"     // writes over Spec.WriteLimitMB; tree killed, its files removed
	StatusProcessLimit Status = "process_limit"  // more processes than Limits.Processes; tree killed
	StatusFileTooLarge Status = "file_too_large" // RLIMIT_FSIZE reached (SIGXFSZ)
	StatusOutputLimit  Status = "output_limit"   // printed more than MaxStdout, killed
	StatusKilled       Status = "killed"         // ended by another signal
	StatusSandboxError Status = "sandbox_error"  // the sandbox could not be set up
)

// Result is the outcome of a run. A program failure is a Result, not an
// error; Run returns an error only when nothing could be run.
type Result struct {
	Status   Status `json:"status"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Reason is a one-line explanation of a non-ok status, written for the
	// model that asked for the run.
	Reason          string `json:"reason,omitempty"`
	Stdout          []byte `json:"-"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	// OutputBytes is the size of stdout (of the combined output with
	// CombinedOutput) before truncation.
	OutputBytes int64 `json:"output_bytes"`
	// Stderr is the summarized standard error: at most 512 lines (the first
	// and last 256 when there were more, with a marker line between).
	Stderr      string        `json:"stderr,omitempty"`
	StderrLines int           `json:"stderr_lines"`
	Duration    time.Duration `json:"duration_ns"`
	CPUTime     time.Duration `json:"cpu_ns"`
	// Sandboxed is false when the run was allowed without namespaces
	// (Config.AllowUnsandboxed on a machine that cannot create them).
	Sandboxed bool `json:"sandboxed"`
	// Isolation lists the mechanisms that confined the run, e.g.
	// "userns", "netns", "pidns", "landlock:v7", "rlimits".
	Isolation []string `json:"isolation"`
}

// MaxStderrLines is the most stderr lines a Result keeps; longer output keeps
// its first and last lines with a marker for what was left out.
const MaxStderrLines = 512

// summarizeLines keeps at most max lines of s: all of them, or the first and
// last max/2 with a marker saying how many were left out. Each kept line is
// cut at 1000 bytes. It returns the summary and the total line count.
func summarizeLines(s string, max int) (string, int) {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "", 0
	}
	lines := strings.Split(s, "\n")
	n := len(lines)
	for i, l := range lines {
		if len(l) > 1000 {
			lines[i] = l[:1000] + "…"
		}
	}
	if n <= max {
		return strings.Join(lines, "\n"), n
	}
	half := max / 2
	var b strings.Builder
	b.WriteString(strings.Join(lines[:half], "\n"))
	fmt.Fprintf(&b, "\n[… %d lines omitted …]\n", n-2*half+1)
	b.WriteString(strings.Join(lines[n-half+1:], "\n"))
	return b.String(), n
}

// cappedBuffer keeps the first max bytes written to it and reports overflow
// once through onOverflow. It never returns an error, so the writer side of
// the pipe keeps draining until the process is killed.
type cappedBuffer struct {
	buf        bytes.Buffer
	max        int
	overflow   bool
	onOverflow func()
}

// Write keeps what fits and reports overflow; it never fails.
func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
		return len(p), nil
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	if !c.overflow {
		c.overflow = true
		if c.onOverflow != nil {
			c.onOverflow()
		}
	}
	return len(p), nil
}

// combinedCeiling is the total combined output after which a run is killed.
const combinedCeiling = 256 << 20

// middleBuffer keeps the first and last max/2 bytes of what is written and
// counts the rest; past ceiling bytes it calls onOverflow once.
type middleBuffer struct {
	mu         sync.Mutex
	head, tail []byte
	max        int
	total      int64
	dropped    int64
	ceiling    int64
	overflowed bool
	onOverflow func()
}

// Write records p, keeping the head and the tail.
func (m *middleBuffer) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total += int64(len(p))
	half := m.max / 2
	rest := p
	if room := half - len(m.head); room > 0 {
		n := min(room, len(rest))
		m.head = append(m.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 {
		m.tail = append(m.tail, rest...)
		if over := len(m.tail) - (m.max - half); over > 0 {
			m.dropped += int64(over)
			m.tail = append(m.tail[:0], m.tail[over:]...)
		}
	}
	if m.total > m.ceiling && !m.overflowed {
		m.overflowed = true
		if m.onOverflow != nil {
			m.onOverflow()
		}
	}
	return len(p), nil
}

// String renders head, a marker for the dropped middle, and tail.
func (m *middleBuffer) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dropped == 0 {
		return string(m.head) + string(m.tail)
	}
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s", m.head, m.dropped, m.tail)
}

// Config configures a Runner.
type Config struct {
	// AllowUnsandboxed lets runs proceed without namespaces when the machine
	// cannot create them (rlimits and Landlock, if available, still apply).
	// The default refuses with SANDBOX_UNAVAILABLE.
	AllowUnsandboxed bool
	// SystemPaths overrides the read-only system paths (default
	// DefaultSystemPaths: /usr /bin /sbin /lib /lib32 /lib64 and a list of
	// non-secret files and folders of /etc).
	SystemPaths []string
	// Capabilities, when non-nil, is used instead of calling Probe.
	Capabilities *Capabilities
	// Network keeps network access (runner.boundaries.sandbox.network):
	// no network namespace and no Landlock TCP rules. Files, processes and
	// resources stay confined.
	Network bool
	// NetworkAllow (runner.boundaries.sandbox.network.allow) lists the
	// host:port pairs a sandboxed program may reach, through a filtering
	// proxy capstan runs outside the sandbox (see ParseNetworkAllow for
	// the spelling). The program gets HTTP_PROXY and HTTPS_PROXY pointing
	// at 127.0.0.1:ProxyPort inside its own network namespace; a program
	// that ignores them reaches nothing. Ignored with Network, and where
	// the machine cannot make namespaces (AllowUnsandboxed).
	NetworkAllow []string
}

// defaultSystemPaths are readable by every sandboxed program (missing ones
// are skipped). /etc is not readable as a whole: it holds secrets
// (shadow, private keys) that a root caller's sandbox could otherwise read;
// only what interpreters and common tools need is listed.
var defaultSystemPaths = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
	"/etc/gai.conf", "/etc/protocols", "/etc/services", "/etc/networks", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates",
	"/etc/ca-certificates.conf", "/etc/pki/tls/certs", "/etc/alternatives", "/etc/mime.types", "/etc/magic",
	"/etc/magic.mime", "/etc/os-release", "/etc/debian_version", "/etc/lsb-release", "/etc/inputrc",
	"/etc/bash.bashrc", "/etc/profile", "/etc/profile.d", "/etc/environment", "/etc/locale.alias",
	"/etc/locale.conf", "/etc/default/locale", "/etc/python3", "/etc/fonts", "/etc/mailcap", "/etc/papersize",
	"/etc/gitconfig", "/etc/manpath.config",
}

// DefaultSystemPaths are readable by every sandboxed program (missing ones
// are skipped). /etc is not readable as a whole: it holds secrets
// (shadow, private keys) that a root caller's sandbox could otherwise read;
// only what interpreters and common tools need is listed.
// It returns a copy: changing it changes nothing else.
func DefaultSystemPaths() []string {
	return slices.Clone(defaultSystemPaths)
}

// sandboxPATH is the PATH inside the sandbox, and where program names are
// looked up.
const sandboxPATH = "/usr/local/bin:/usr/bin:/bin"

// Runner runs programs in the sandbox. It is safe for concurrent use.
type Runner struct {
	cfg  Config
	caps Capabilities
}

// New returns a Runner. It probes the machine once (unless cfg.Capabilities
// is set); the outcome is available from Capabilities.
func New(ctx context.Context, cfg Config) *Runner {
	r := &Runner{cfg: cfg}
	if cfg.Capabilities != nil {
		r.caps = *cfg.Capabilities
	} else {
		r.caps = Probe(ctx)
	}
	if r.cfg.SystemPaths == nil {
		r.cfg.SystemPaths = defaultSystemPaths
	}
	return r
}

// Capabilities returns what the start-up probe found.
func (r *Runner) Capabilities() Capabilities { return r.caps }

// under reports whether p is one of roots or inside one of them.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}
