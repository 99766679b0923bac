package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/tool"
)

// env is a work dir with the built-in tools, plus a sibling "outside" dir
// holding a secret file the tools must never reach.
type env struct {
	t       *testing.T
	base    string // parent of work and outside
	work    string
	outside string
	tools   map[string]tool.Tool
}

func newEnv(t *testing.T, mod ...func(*Config)) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, base: base, work: filepath.Join(base, "work"), outside: filepath.Join(base, "outside"), tools: map[string]tool.Tool{}}
	for _, d := range []string{e.work, e.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.outside, "secret.txt"), []byte("TOP-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{WorkDir: e.work}
	for _, m := range mod {
		m(&cfg)
	}
	tools, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		e.tools[tl.Spec().Name] = tl
	}
	return e
}

// write creates a file under the work dir.
func (e *env) write(rel, content string) string {
	e.t.Helper()
	p := filepath.Join(e.work, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// symlink creates a link at rel (under the work dir) pointing to target.
func (e *env) symlink(target, rel string) {
	e.t.Helper()
	p := filepath.Join(e.work, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) read(rel string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(e.work, rel))
	return string(b), err == nil
}

// call runs a tool with input given as a Go value.
func (e *env) call(name string, input any) tool.Result {
	e.t.Helper()
	return e.callCtx(context.Background(), name, input)
}

func (e *env) callCtx(ctx context.Context, name string, input any) tool.Result {
	e.t.Helper()
	raw, ok := input.(string)
	var data []byte
	if ok {
		data = []byte(raw)
	} else {
		var err error
		if data, err = json.Marshal(input); err != nil {
			e.t.Fatal(err)
		}
	}
	res, err := e.tools[name].Run(ctx, data)
	if err != nil {
		e.t.Fatalf("%s returned error %v (failures must be error results)", name, err)
	}
	return res
}

func mustOK(t *testing.T, r tool.Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected error result: %s", r.Content)
	}
	return r.Content
}

func mustFail(t *testing.T, r tool.Result, code string) string {
	t.Helper()
	if !r.IsError {
		t.Fatalf("want error result with %s, got success: %s", code, r.Content)
	}
	if !strings.Contains(r.Content, code) {
		t.Fatalf("error result lacks %s: %s", code, r.Content)
	}
	return r.Content
}

type m = map[string]any

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
