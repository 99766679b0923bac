//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
)

// BenchmarkSandboxRun measures the start-up overhead of one sandboxed run
// (namespaces, two helper stages, Landlock, rlimits) of /bin/true.
func BenchmarkSandboxRun(b *testing.B) {
	r := New(context.Background(), Config{})
	if r.Capabilities().Unavailable() != nil {
		b.Skip("no sandbox")
	}
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Run(context.Background(), Spec{Argv: []string{"true"}, Dir: dir})
		if err != nil || res.Status != StatusOK {
			b.Fatal(err, res.Status, res.Reason)
		}
	}
}

// BenchmarkSandboxPython measures a sandboxed python3 script end to end.
func BenchmarkSandboxPython(b *testing.B) {
	r := New(context.Background(), Config{})
	if r.Capabilities().Unavailable() != nil {
		b.Skip("no sandbox")
	}
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Run(context.Background(), Spec{Argv: []string{"python3", "-c", "import json; print(json.dumps({'ok': 1}))"}, Dir: dir})
		if err != nil || res.Status != StatusOK {
			b.Fatal(err, res.Status, res.Reason)
		}
	}
}

// BenchmarkBashCall measures one call of the Bash tool (`echo hi`, the
// tool's input decoded, the command run, its output returned) side by
// side: unsandboxed (builtin.ExecRunner, what --no-sandbox gets) and
// sandboxed (CommandRunner, the default). The ratio is what the default
// sandbox adds to each Bash call.
func BenchmarkBashCall(b *testing.B) {
	r := New(context.Background(), Config{})
	if r.Capabilities().Unavailable() != nil {
		b.Skip("no sandbox")
	}
	for _, c := range []struct {
		name   string
		runner tool.CommandRunner
	}{{"unsandboxed", nil}, {"sandboxed", &CommandRunner{Runner: r}}} {
		b.Run(c.name, func(b *testing.B) {
			tools, err := builtin.New(builtin.Config{WorkDir: b.TempDir(), Runner: c.runner})
			if err != nil {
				b.Fatal(err)
			}
			var bash tool.Tool
			for _, t := range tools {
				if t.Spec().Name == "Bash" {
					bash = t
				}
			}
			input := json.RawMessage(`{"command":"echo hi"}`)
			b.ReportAllocs()
			for b.Loop() {
				res, err := bash.Run(context.Background(), input)
				if err != nil || res.IsError || !strings.Contains(res.Content, "hi") {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}
