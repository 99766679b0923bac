//go:build linux

package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// hideProcEnv asks the test binary, started as a sandbox helper, to cover
// /proc with an empty tmpfs in its own mount namespace before the helper
// runs (see TestMain), so that no /proc/<pid> exists for it.
const hideProcEnv = "CAPSTAN_TEST_HIDE_PROC"

// hideProcExit is the exit code of a helper that could not hide /proc.
const hideProcExit = 99

// hideProcIfAsked covers /proc when hideProcEnv is set; it runs before
// Init in TestMain.
func hideProcIfAsked() {
	if os.Getenv(hideProcEnv) != "1" {
		return
	}
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "hide /proc: %s: %v\n", what, err)
		os.Exit(hideProcExit)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("make mounts private", err)
	}
	if err := unix.Mount("noproc", "/proc", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k"); err != nil {
		fail("mount tmpfs", err)
	}
	if ents, err := os.ReadDir("/proc"); err != nil || len(ents) != 0 {
		fail("check", fmt.Errorf("/proc still lists %d entries (%v)", len(ents), err))
	}
}

// TestLandlockNeedsNoProc runs stage two, in the sandbox's namespaces,
// with /proc empty: setting up Landlock must open nothing but the
// configured paths. It used to add a rule for /proc/<pid>/task in cgo
// builds (where the PID is the namespace's, so the outer /proc named
// another process or none) and failed whenever that path was missing.
// The program then shows the rules in force: it writes in the writable
// directory, reads the read-only one, and can neither write nor read
// outside them.
func TestLandlockNeedsNoProc(t *testing.T) {
	r := sharedRunner(t)
	root, build := skillDir(t, map[string]string{"data.txt": "readable"})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `echo ok > "$B/out" || exit 11
cat "$R/data.txt" || exit 12
if echo x > "$O/new" 2>/dev/null; then exit 13; fi
if cat "$O/secret" 2>/dev/null; then exit 14; fi
exit 0`
	hs := helperSpec{
		Argv:        []string{"/bin/sh", "-c", script},
		Env:         []string{"PATH=" + sandboxPATH, "B=" + build, "R=" + root, "O=" + outside},
		Dir:         root,
		ReadOnly:    append(append([]string{}, defaultSystemPaths...), root),
		Writable:    []string{build},
		Limits:      Limits{}.withDefaults(),
		LandlockABI: r.Capabilities().LandlockABI,
	}
	specJSON, err := json.Marshal(hs)
	if err != nil {
		t.Fatal(err)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, helperArg, "exec")
	cmd.Env = []string{helperEnv + "=1", hideProcEnv + "=1"}
	cmd.ExtraFiles = []*os.File{specR}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = procAttr(true, false)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	specR.Close()
	if _, err := specW.Write(specJSON); err != nil {
		t.Fatal(err)
	}
	specW.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stage two with an empty /proc: %v\nstderr: %s", err, stderr.String())
	}
	if got := stdout.String(); got != "readable" {
		t.Errorf("stdout = %q, want the read-only file's content", got)
	}
	if b, err := os.ReadFile(filepath.Join(build, "out")); err != nil || string(b) != "ok\n" {
		t.Errorf("build/out = %q, %v; want the program's write", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("the program wrote outside its writable directory")
	}
}

// TestLandlockRulesEveryABI builds the sandbox's ruleset for every
// Landlock ABI this kernel knows (up to the newest one the sandbox uses)
// and adds every rule to it: the kernel must accept each handled set and
// each rule's rights, the files (/dev/null, a read-only file) included.
func TestLandlockRulesEveryABI(t *testing.T) {
	r := sharedRunner(t)
	root, build := skillDir(t, map[string]string{"tool.py": "print(1)"})
	hs := helperSpec{
		ReadOnly: append(append([]string{}, defaultSystemPaths...), root, filepath.Join(root, "tool.py"), "/nonexistent-capstan-path"),
		Writable: []string{build},
	}
	for abi := 1; abi <= min(r.Capabilities().LandlockABI, landlockMaxABI); abi++ {
		for _, network := range []bool{false, true} {
			attr := landlockHandled(abi, network)
			rs, err := ll.LandlockCreateRuleset(&attr, 0)
			if err != nil {
				t.Fatalf("ABI %d network=%v: create ruleset: %v", abi, network, err)
			}
			for _, rule := range landlockRules(hs) {
				if err := addLandlockRule(rs, rule, attr.HandledAccessFS); err != nil {
					t.Errorf("ABI %d: %v", abi, err)
				}
			}
			unix.Close(rs)
		}
	}
}

// TestLandlockRefusesSymlinkedWritableDir: a writable directory replaced
// by a symlink after the caller checked it is refused, not followed.
func TestLandlockRefusesSymlinkedWritableDir(t *testing.T) {
	r := sharedRunner(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "build")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	attr := landlockHandled(min(r.Capabilities().LandlockABI, landlockMaxABI), false)
	rs, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rs)
	rule := landlockRules(helperSpec{Writable: []string{link}})[0]
	err = addLandlockRule(rs, rule, attr.HandledAccessFS)
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("symlinked writable directory: err = %v, want a refusal", err)
	}
}

// TestLandlockHandledMatchesLibraryConfigs: for every ABI the sandbox
// uses, the ruleset restricts exactly what go-landlock's configuration of
// that ABI restricts (everything the kernel offers at that version), TCP
// excepted when the network is kept. Dropping a right from the ruleset
// fails here, whatever kernel runs the test.
func TestLandlockHandledMatchesLibraryConfigs(t *testing.T) {
	configs := []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6}
	if len(configs) != landlockMaxABI {
		t.Fatalf("%d library configurations for %d ABIs", len(configs), landlockMaxABI)
	}
	for i, cfg := range configs {
		abi := i + 1
		for _, network := range []bool{false, true} {
			got := landlockHandled(abi, network)
			wantNet := uint64(cfg.HandledAccessNet)
			if network {
				wantNet = 0
			}
			if got.HandledAccessFS != uint64(cfg.HandledAccessFS) || got.HandledAccessNet != wantNet || got.Scoped != uint64(cfg.Scoped) {
				t.Errorf("ABI %d network=%v: fs %#x net %#x scoped %#x; want fs %#x net %#x scoped %#x", abi, network,
					got.HandledAccessFS, got.HandledAccessNet, got.Scoped, uint64(cfg.HandledAccessFS), wantNet, uint64(cfg.Scoped))
			}
		}
	}
}
