package main

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommandAndFlagAgree(t *testing.T) {
	code, out, _ := captureConfigCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "capstan ") || !strings.Contains(out, "go      "+runtime.Version()) {
		t.Fatalf("version exit %d:\n%s", code, out)
	}
	code, flagOut, _ := captureConfigCLI(t, "--version")
	if code != 0 || flagOut != out {
		t.Fatalf("--version exit %d:\n%s\nwant:\n%s", code, flagOut, out)
	}
}

// Values set at link time (-ldflags -X, as scripts/release.sh does) win
// over the build info.
func TestVersionLinkTimeValues(t *testing.T) {
	old := [3]string{version, commit, buildDate}
	t.Cleanup(func() { version, commit, buildDate = old[0], old[1], old[2] })
	version, commit, buildDate = "v1.2.3", "0123456789abcdef", "2026-11-24T21:00:00Z"
	code, out, _ := captureConfigCLI(t, "version", "--json")
	for _, want := range []string{`"version": "v1.2.3"`, `"commit": "0123456789abcdef"`, `"buildDate": "2026-11-24T21:00:00Z"`, `"goVersion": "` + runtime.Version()} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, missing %s:\n%s", code, want, out)
		}
	}
}
