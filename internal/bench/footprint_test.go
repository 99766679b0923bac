// Package bench measures capstan's footprint — binary size, start-up time
// and memory, the linker's dead-method elimination — next to its floor: a
// cobra CLI that makes one streamed tool call with anthropic-sdk-go and one
// with openai-go/v3 (testdata/floorcli), built in the same run.
//
// Set CAPSTAN_BENCH_BASE to another checkout of capstan (for example a
// worktree of main) to measure it side by side as "before".
package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fakellm"
)

// binary is one program under measurement.
type binary struct {
	name, dir, pkg string
}

// binaries are capstan (this tree), the floor CLI and, with
// CAPSTAN_BENCH_BASE, capstan from another checkout.
func binaries(tb testing.TB) []binary {
	root := moduleRoot(tb)
	bins := []binary{
		{"capstan", root, "./cmd/capstan"},
		{"floor", root, "./internal/bench/testdata/floorcli"},
	}
	if base := os.Getenv("CAPSTAN_BENCH_BASE"); base != "" {
		bins = append(bins, binary{"capstan-base", base, "./cmd/capstan"})
	}
	return bins
}

func moduleRoot(tb testing.TB) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

var (
	buildMu    sync.Mutex
	buildDir   string
	buildCache = map[string]string{}
)

// build runs go build for b with ldflags (cached per process) and returns
// the executable's path.
func build(tb testing.TB, b binary, ldflags string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	key := b.name + "|" + ldflags
	if p, ok := buildCache[key]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "capstan-footprint-")
		if err != nil {
			tb.Fatal(err)
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, fmt.Sprintf("%s-%d", b.name, len(buildCache)))
	cmd := exec.Command("go", "build", "-ldflags="+ldflags, "-o", out, b.pkg)
	cmd.Dir = b.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("go build %s in %s: %v\n%s", b.pkg, b.dir, err, stderr.String())
	}
	buildCache[key] = out
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// BenchmarkBinarySize reports each binary's size, unstripped and stripped
// (-s -w), in MiB. The time per op is meaningless (one build).
//
//	go test ./internal/bench -run XXX -bench BinarySize -benchtime 1x
func BenchmarkBinarySize(b *testing.B) {
	for _, bin := range binaries(b) {
		for _, v := range []struct{ name, ldflags string }{{"unstripped", ""}, {"stripped", "-s -w"}} {
			b.Run(bin.name+"/"+v.name, func(b *testing.B) {
				p := build(b, bin, v.ldflags)
				fi, err := os.Stat(p)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
			})
		}
	}
}

// BenchmarkStartup runs each binary as a process: --help for all, and
// capstan's validate of the hello example. It reports wall time per run
// and the peak RSS of the child (MiB).
//
//	go test ./internal/bench -run XXX -bench Startup -benchtime 50x
func BenchmarkStartup(b *testing.B) {
	root := moduleRoot(b)
	for _, bin := range binaries(b) {
		cases := [][]string{{"--help"}}
		if bin.name != "floor" {
			cases = append(cases, []string{"validate", filepath.Join(root, "examples", "hello")})
		}
		for _, args := range cases {
			b.Run(bin.name+"/"+args[0], func(b *testing.B) {
				p := build(b, bin, "")
				var peak int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					cmd := exec.Command(p, args...)
					cmd.Env = append(os.Environ(), "NO_COLOR=1")
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("%s %v: %v\n%s", bin.name, args, err, out)
					}
					if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > peak {
						peak = ru.Maxrss
					}
				}
				b.ReportMetric(float64(peak)/1024, "RSS-MiB")
			})
		}
	}
}

// The floor CLI is a real client: it makes one streamed tool call with
// each SDK against the fake servers.
func TestFloorCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	bins := binaries(t)
	p := build(t, bins[1], "")
	for _, d := range []fakellm.Dialect{fakellm.Anthropic, fakellm.OpenAI} {
		srv := fakellm.Start(d, fakellm.Options{Respond: func(fakellm.Request) fakellm.Reply {
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "get_weather", Input: []byte(`{"city":"Paris"}`)}}}
		}})
		base := srv.URL
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, p, string(d), "--base-url", base).CombinedOutput()
		cancel()
		srv.Close()
		if err != nil || strings.TrimSpace(string(out)) != `get_weather {"city":"Paris"}` {
			t.Errorf("%s: %v\n%s", d, err, out)
		}
	}
}

// reflectMethodLookups are the reflect entry points that, called with a
// name the compiler cannot see, make the linker keep every exported method
// of every reachable type.
var reflectMethodLookups = []string{"reflect.Value.MethodByName", "reflect.Value.Method", "reflect.(*rtype).MethodByName", "reflect.(*rtype).Method"}

// constantNameCallers call MethodByName with constant names only ("Get",
// "ProtoType", "Interface"), which the linker resolves without giving up
// dead-method elimination.
var constantNameCallers = map[string]bool{
	"google.golang.org/protobuf/internal/descfmt.formatListOpt": true,
	"google.golang.org/protobuf/internal/descfmt.formatDescOpt": true,
}

// TestNoReflectMethodLookup proves with the linker's own dependency dump
// (-ldflags=-dumpdep) that nothing reachable in capstan looks methods up
// by a computed name: not text/template's or html/template's executor, not
// a Handlebars library. Such a caller turns dead-method elimination off
// (openai-go alone grows by more than 5 MB).
func TestNoReflectMethodLookup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	root := moduleRoot(t)
	cmd := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", filepath.Join(t.TempDir(), "capstan"), "./cmd/capstan")
	cmd.Dir = root
	var dump bytes.Buffer
	cmd.Stderr = &dump
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v\n%.2000s", err, dump.String())
	}
	callers := map[string]bool{}
	sc := bufio.NewScanner(&dump)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok || strings.HasPrefix(from, "reflect.") || strings.HasPrefix(from, "type:") {
			continue
		}
		for _, m := range reflectMethodLookups {
			if to == m {
				callers[from+" -> "+to] = !constantNameCallers[from]
			}
		}
		if strings.HasPrefix(from, "text/template.(*state).evalField") || strings.HasPrefix(from, "github.com/mailgun/raymond") {
			callers[from] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for c, bad := range callers {
		if bad {
			t.Errorf("reachable method lookup by name: %s", c)
		} else {
			t.Logf("constant-name lookup (keeps dead-method elimination): %s", c)
		}
	}
}
