package agentdir

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"
)

// benchPrompt is a ~2 KB prompt with frontmatter and 5 variables.
func benchPrompt() string {
	var b strings.Builder
	b.WriteString("---\nstepId: initial.issue\nuvVariables: [issue, repo, branch, iteration, previous_summary]\n---\n")
	b.WriteString("# Work on issue {uv-issue} in {uv-repo}\n\n")
	para := "Read the issue carefully, plan the change, edit the code, run the tests and commit. Keep the change small and focused. "
	for b.Len() < 1700 {
		b.WriteString(para)
	}
	b.WriteString("\n\nBranch: {uv-branch}. Iteration {uv-iteration}.\n\n## Previous summary\n{uv-previous_summary}\n")
	return b.String()
}

var benchVars = map[string]string{
	"issue": "42", "repo": "capstan-dev/capstan", "branch": "fix/42-prompt-cache",
	"iteration": "3", "previous_summary": "Implemented the resolver; tests pending.",
}

// BenchmarkResolve measures a cached resolution of a 2 KB prompt with 5
// variables: what resolving a step's prompt costs each iteration.
func BenchmarkResolve(b *testing.B) {
	dir := b.TempDir()
	writePrompt(b, dir, "prompts/steps/initial/issue/f_default.md", benchPrompt())
	benchmarkCachedResolve(b, NewPromptResolver(PromptConfig{AgentDir: dir}))
}

// benchmarkCachedResolve measures r's resolution of the bench prompt once
// it is cached.
func benchmarkCachedResolve(b *testing.B, r *PromptResolver) {
	ctx := context.Background()
	ref := PromptRef{C2: "initial", C3: "issue"}
	if _, err := r.Resolve(ctx, ref, benchVars); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Resolve(ctx, ref, benchVars)
		if err != nil || len(res.Text) < 1800 {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolvePinned is BenchmarkResolve with the prompts read from a
// pinned definition (Config.FS): a cache hit needs no stat of the file.
func BenchmarkResolvePinned(b *testing.B) {
	fsys := fstest.MapFS{"prompts/steps/initial/issue/f_default.md": {Data: []byte(benchPrompt())}}
	benchmarkCachedResolve(b, NewPromptResolver(PromptConfig{AgentDir: b.TempDir(), FS: fsys}))
}

// BenchmarkResolveUncached measures a resolution that reads and parses the
// file (a fresh Resolver each time).
func BenchmarkResolveUncached(b *testing.B) {
	dir := b.TempDir()
	writePrompt(b, dir, "prompts/steps/initial/issue/f_default.md", benchPrompt())
	ctx := context.Background()
	ref := PromptRef{C2: "initial", C3: "issue"}
	b.ReportAllocs()
	for b.Loop() {
		r := NewPromptResolver(PromptConfig{AgentDir: dir})
		if _, err := r.Resolve(ctx, ref, benchVars); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubstitute measures the one-pass substitution alone.
func BenchmarkSubstitute(b *testing.B) {
	tpl, err := parsePromptTemplate([]byte(benchPrompt()), "f.md")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		tpl.render(benchVars)
	}
}
