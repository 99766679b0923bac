package tool

import (
	"strings"
	"testing"
)

// BenchmarkPolicyDecide measures one permission check of a Bash call
// against a typical allow/deny list.
func BenchmarkPolicyDecide(b *testing.B) {
	p := Policy{
		Allowed:    []string{"Read", "Glob", "Grep", "Edit(src/**)", "Bash(git log:*)", "Bash(go test:*)", "mcp__github__*"},
		Disallowed: []string{"Bash(git push:*)", "Edit(src/secrets/**)"},
		Mode:       ModeAcceptEdits,
	}
	in := bash("go test ./... -run TestX")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !p.Decide(tBash, in).Allowed {
			b.Fatal("denied")
		}
	}
}

// BenchmarkPolicyDecideBoundary is BenchmarkPolicyDecide in a work step,
// where every Bash command is also matched against the GitHub boundary
// commands.
func BenchmarkPolicyDecideBoundary(b *testing.B) {
	p := Policy{
		Allowed:    []string{"Read", "Glob", "Grep", "Edit(src/**)", "Bash(git log:*)", "Bash(go test:*)", "mcp__github__*"},
		Disallowed: []string{"Bash(git push:*)", "Edit(src/secrets/**)"},
		Mode:       ModeAcceptEdits,
		Boundary:   "a work step may not change issues",
	}
	in := bash("go test ./... -run TestX")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !p.Decide(tBash, in).Allowed {
			b.Fatal("denied")
		}
	}
}

// BenchmarkBoundaryCommandLong matches the boundary rules against a long
// command line that runs gh many times (read-only), the worst case of the
// per-invocation checks.
func BenchmarkBoundaryCommandLong(b *testing.B) {
	cmd := strings.Repeat("gh issue view 12 --json state -q .state && ", 200) + "true"
	b.SetBytes(int64(len(cmd)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if m, ok := BoundaryCommand(cmd); ok {
			b.Fatalf("matched %q", m)
		}
	}
}

// BenchmarkPolicyDecideNameOnly checks a Read call against rules that
// name tools only (no argument rule for Read): its input is never parsed.
func BenchmarkPolicyDecideNameOnly(b *testing.B) {
	p := Policy{
		Allowed:    []string{"Read", "Glob", "Grep", "Bash(go test:*)"},
		Disallowed: []string{"Bash(git push:*)"},
	}
	in := []byte(`{"file_path":"src/main.go","offset":10,"limit":200}`)
	b.ReportAllocs()
	for b.Loop() {
		if !p.Decide(tRead, in).Allowed {
			b.Fatal("denied")
		}
	}
}
