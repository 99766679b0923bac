//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// RunStreams hands the program's streams to the caller's writers as they
// come: printing past the spec's MaxOutput does not end the run, stdout
// and stderr stay apart, and a limit the sandbox enforced is said on
// stderr.
func TestRunStreamsWritesTheStreamsToTheWriters(t *testing.T) {
	dir := t.TempDir()
	c := &CommandRunner{Runner: sharedRunner(t)}
	var out, errb bytes.Buffer
	res, err := c.RunStreams(context.Background(), []string{"sh", "-c", "yes | head -c 3000000; echo err >&2; exit 3"},
		tool.CommandSpec{Dir: dir, MaxOutput: 1000}, &out, &errb)
	if err != nil || res.ExitCode != 3 || res.TimedOut || res.Output != "" {
		t.Fatalf("%+v %v", res, err)
	}
	if out.Len() != 3000000 || errb.String() != "err\n" {
		t.Errorf("stdout %d bytes, stderr %q", out.Len(), errb.String())
	}

	out.Reset()
	errb.Reset()
	res, err = c.WithLimits(Limits{FileSizeMB: 1}).RunStreams(context.Background(), []string{"sh", "-c", "head -c 3000000 /dev/zero > big"},
		tool.CommandSpec{Dir: dir}, &out, &errb)
	if err != nil || res.ExitCode == 0 || !strings.Contains(errb.String(), "[sandbox: file size limit of 1 MiB reached") {
		t.Errorf("file size limit: %+v %v, stderr %q", res, err, errb.String())
	}
}

// A Spec cannot both combine the streams and hand them to writers.
func TestCombinedOutputRefusesWriters(t *testing.T) {
	var w bytes.Buffer
	_, err := sharedRunner(t).Run(context.Background(), Spec{Argv: []string{"true"}, Dir: t.TempDir(), CombinedOutput: true, Stdout: &w})
	if !errors.Is(err, agenterr.ErrToolInput) {
		t.Fatalf("want TOOL_INPUT, got %v", err)
	}
}
