package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// seedHelperEnv makes the test binary build a seed under the root it names
// and nothing else (see TestMain): the process a test kills.
const seedHelperEnv = "CAPSTAN_TEST_SEED_HELPER_ROOT"

// seedHelperIfAsked builds a seed under $seedHelperEnv and exits, when set.
func seedHelperIfAsked() {
	root := os.Getenv(seedHelperEnv)
	if root == "" {
		return
	}
	_, err := GoStdlibSeed(context.Background(), root, os.Environ())
	fmt.Fprintln(os.Stderr, "seed:", err)
	os.Exit(0)
}

// TestGoStdlibSeedEndsWithAKilledCapstan: when the process building the
// standard library's seed is killed (kill -9 of capstan during a run's
// first command), the go command building it ends too, instead of
// compiling on for a minute with nobody waiting, and the next seed removes
// the directory the killed build left.
func TestGoStdlibSeedEndsWithAKilledCapstan(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "go.pid")
	// A go whose build never ends: it says where it runs and sleeps.
	fakeGo := "#!/bin/sh\ncase \"$1\" in\nenv) echo go1.99 ;;\ntest) echo $$ > " + pidFile + "; exec sleep 600 ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(self, "-test.run=^$")
	helper.Env = append(os.Environ(), seedHelperEnv+"="+root, "PATH="+bin+":/usr/bin:/bin")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(time.Minute); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			helper.Process.Kill()
			t.Fatal("the seed's go test never started")
		}
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	for deadline := time.Now().Add(time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the seed's go test (pid %d) still runs after the process that started it was killed", pid)
		}
	}
	left, _ := filepath.Glob(filepath.Join(root, seedBuildPrefix+"*"))
	if len(left) != 1 {
		t.Fatalf("the killed build left %v, want its one build directory", left)
	}
	// The next seed (with a go that builds nothing, so it fails) first
	// removes what the killed build left.
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\n[ \"$1\" = env ] && echo go1.99\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := GoStdlibSeed(context.Background(), root, []string{"PATH=" + bin + ":/usr/bin:/bin"}); err == nil {
		t.Fatal("a go that wrote no build cache made a seed")
	}
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Errorf("the killed build's directory %s is still there (%v)", left[0], err)
	}
}
