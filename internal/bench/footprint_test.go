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
	"encoding/json"
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

// runMeasured runs the program and returns its CPU time (user + system)
// and peak RSS. CPU time is reported next to wall time because it moves
// far less when other processes share the machine.
func runMeasured(tb testing.TB, p string, args ...string) (cpu time.Duration, rssKiB int64) {
	cmd := exec.Command(p, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("%s %v: %v\n%s", p, args, err, out)
	}
	ps := cmd.ProcessState
	cpu = ps.UserTime() + ps.SystemTime()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		rssKiB = ru.Maxrss
	}
	return cpu, rssKiB
}

// measure runs p b.N times and reports CPU ms and mean peak RSS per run.
func measure(b *testing.B, p string, args ...string) {
	var cpu time.Duration
	var rss int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, r := runMeasured(b, p, args...)
		cpu += c
		rss += r
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(rss)/1024/float64(b.N), "RSS-MiB")
}

// BenchmarkStartup runs each binary as a process: --help for all, and
// capstan's validate of the hello example. It reports wall time per run
// and, per run, the child's CPU time and peak RSS (MiB).
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
				measure(b, build(b, bin, ""), args...)
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

// TestNoReflectMethodLookup proves with the linker's own dependency dump
// (-ldflags=-dumpdep) that nothing reachable in capstan looks methods up
// by a computed name. The linker marks such functions <ReflectMethod>
// (text/template's evalField, a Handlebars library's method evaluation)
// and, when one is reachable, keeps every exported method of every
// reachable type: openai-go alone grows by more than 5 MB. Calls with a
// constant name (protobuf's MethodByName("Get")) are not marked and keep
// dead-method elimination on.
func TestNoReflectMethodLookup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	cmd := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", filepath.Join(t.TempDir(), "capstan"), "./cmd/capstan")
	cmd.Dir = moduleRoot(t)
	var dump bytes.Buffer
	cmd.Stderr = &dump
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v\n%.2000s", err, dump.String())
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(&dump)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		from, _, _ := strings.Cut(sc.Text(), " -> ")
		if strings.Contains(from, "<ReflectMethod>") && !seen[from] {
			seen[from] = true
			t.Errorf("reachable method lookup by a computed name: %s", from)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// agentWithSteps writes a copy of the hello example whose registry is a
// chain of n steps (each with a keyword check that moves to the next).
func agentWithSteps(tb testing.TB, n int) string {
	tb.Helper()
	src := filepath.Join(moduleRoot(tb), "examples", "hello")
	dir := tb.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		tb.Fatal(err)
	}
	steps := map[string]any{}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("initial.step%03d", i)
		s := map[string]any{"stepId": id, "name": fmt.Sprintf("Step %d", i), "c2": "initial", "c3": "greet", "uvVariables": []string{"name"}}
		if i < n-1 {
			s["check"] = map[string]any{"type": "keyword", "keywords": []string{"STEP_DONE"},
				"onPass": map[string]any{"next": fmt.Sprintf("initial.step%03d", i+1)}, "onFail": map[string]any{"retry": true}}
		}
		steps[id] = s
	}
	reg, err := json.MarshalIndent(map[string]any{"agentId": "hello", "version": "1.0.0", "c1": "steps",
		"entryStep": "initial.step000", "steps": steps}, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "steps_registry.json"), reg, 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// BenchmarkValidate runs `capstan validate` over exec on agents of 2, 21
// and 200 steps, next to `capstan --help` (its floor: the same process
// doing no work) in the same run.
//
//	go test ./internal/bench -run XXX -bench Validate -benchtime 30x
func BenchmarkValidate(b *testing.B) {
	dirs := map[int]string{}
	for _, n := range []int{2, 21, 200} {
		dirs[n] = agentWithSteps(b, n)
	}
	for _, bin := range binaries(b) {
		if bin.name == "floor" {
			continue
		}
		runs := []struct {
			name string
			args []string
		}{{"help", []string{"--help"}}}
		for _, n := range []int{2, 21, 200} {
			runs = append(runs, struct {
				name string
				args []string
			}{fmt.Sprintf("steps-%d", n), []string{"validate", dirs[n]}})
		}
		for _, r := range runs {
			b.Run(bin.name+"/"+r.name, func(b *testing.B) {
				measure(b, build(b, bin, ""), r.args...)
			})
		}
	}
}
