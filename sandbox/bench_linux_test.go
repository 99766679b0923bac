//go:build linux

package sandbox

import (
	"context"
	"testing"
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
