//go:build linux

package verify

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/sandbox"
)

// BenchmarkCommandValidator measures one command validator run (sh -c
// true) with and without the sandbox: the difference is what confining a
// validator adds to each verification.
func BenchmarkCommandValidator(b *testing.B) {
	benchValidator(b, "true", func(b *testing.B, work string) {})
}

// BenchmarkGoTestValidator measures "go test ./..." of a one-test module:
// unsandboxed it uses the user's warm build cache; sandboxed without a
// cache it starts from an empty one (the user's is out of reach) and
// compiles the standard library packages the test needs on every run;
// sandboxed with the run's cache (sandboxed-cache) it measures the second
// and later validations of a run: one run before the timing (the test
// baseline) fills the cache, which is then sealed.
func BenchmarkGoTestValidator(b *testing.B) {
	if testing.Short() {
		b.Skip("compiles the standard library on every sandboxed run; not with -short")
	}
	benchValidator(b, "go test ./...", func(b *testing.B, work string) {
		write(b, work, "go.mod", "module example.com/calc\n\ngo 1.21\n")
		write(b, work, "calc_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {}\n")
	})
}

func benchValidator(b *testing.B, command string, setup func(b *testing.B, work string)) {
	for _, c := range []struct {
		name  string
		sb    func(testing.TB) CommandSandbox
		cache bool
	}{
		{"unsandboxed", func(testing.TB) CommandSandbox { return nil }, false},
		{"sandboxed", func(tb testing.TB) CommandSandbox { return validatorSandbox(tb) }, false},
		{"sandboxed-cache", nil, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			work := b.TempDir()
			setup(b, work)
			var sb CommandSandbox
			var cache *sandbox.Cache
			if c.cache {
				var err error
				if cache, err = sandbox.NewCache(b.TempDir()); err != nil {
					b.Fatal(err)
				}
				defer cache.Remove()
				sb = validatorSandbox(b).WithCache(cache)
			} else {
				sb = c.sb(b)
			}
			v := newValidator(b, ValidatorConfig{
				Validators: map[string]agentdir.Validator{"v": {Type: "command", Command: command, FailurePattern: "failed"}},
				Patterns:   map[string]agentdir.CompletionPattern{"failed": {Edition: "failed"}},
				WorkDir:    work,
				Sandbox:    sb,
			})
			conds := []agentdir.CompletionCondition{{Validator: "v"}}
			validate := func() {
				r, err := v.Validate(context.Background(), conds)
				if err != nil || !r.Valid {
					b.Fatalf("%+v %v", r.Output, err)
				}
			}
			if cache != nil {
				validate() // the test baseline
				cache.Seal()
			}
			for b.Loop() {
				validate()
			}
		})
	}
}
