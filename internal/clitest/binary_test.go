package clitest

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// TestBuildCapstanIsSharedBySource: packages that build capstan at the
// same time get one binary, the one a later build of the same source
// returns, and it runs.
func TestBuildCapstanIsSharedBySource(t *testing.T) {
	var wg sync.WaitGroup
	bins, errs := make([]Binary, 2), make([]error, 2)
	for i := range bins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bins[i], errs[i] = BuildCapstan(false)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	again, err := BuildCapstan(false)
	if err != nil {
		t.Fatal(err)
	}
	if bins[0] != bins[1] || again != bins[0] {
		t.Fatalf("one source, several binaries: %q %q %q", bins[0], bins[1], again)
	}
	if !strings.HasPrefix(string(again), os.TempDir()) {
		t.Fatalf("binary %q outside the temporary directory", again)
	}
	code, out, errOut := again.Capture(t, "version")
	if code != 0 || !strings.Contains(out, "capstan") {
		t.Fatalf("capstan version: exit %d\n%s\n%s", code, out, errOut)
	}
}
