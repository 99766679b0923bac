package builtin

import "testing"

// Agents of one process share the built-in tool specs (descriptions and
// compacted schemas) instead of building a copy each.
func TestSpecsShared(t *testing.T) {
	a, err := New(Config{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		sa, sb := a[i].Spec(), b[i].Spec()
		if &sa.InputSchema[0] != &sb.InputSchema[0] || sa.Description != sb.Description {
			t.Errorf("%s: spec built twice", sa.Name)
		}
	}
	allocs := testing.AllocsPerRun(100, func() { _ = a[0].Spec() })
	if allocs > 1 {
		t.Errorf("Read.Spec allocates %.0f times per call", allocs)
	}
}
