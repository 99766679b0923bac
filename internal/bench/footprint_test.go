// Package bench measures capstan's footprint — binary size, start-up time
// and memory, the linker's dead-method elimination — next to its floor,
// built in the same run: a cobra CLI that makes one streamed tool call with
// anthropic-sdk-go and one with openai-go/v3 (testdata/floorcli). When
// capstan's binary links the Temporal Go SDK, the floor is that CLI plus a
// Temporal client and worker registering one workflow
// (testdata/floortemporal, its own module pinning the SDK's version), so
// each figure sits next to the floor that contains what capstan contains.
//
// Every binary — capstan, its base and the floors — is built the way
// scripts/release.sh builds a release (releaseEnv, releaseFlags;
// TestReleaseBuildFlags holds the two to the same flags), so each figure
// sits next to a floor built the same way.
//
// Set CAPSTAN_BENCH_BASE to another checkout of capstan (for example a
// worktree of main) to measure it side by side as "before", and
// CAPSTAN_BENCH_FLOOR=all to measure both floors whatever capstan links.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/sandbox"
)

// binary is one program under measurement: package pkg built in dir, with
// overlay (a go build -overlay file) when set.
type binary struct {
	name, dir, pkg string
	overlay        func(testing.TB) string
}

// temporalModule is the module whose presence in capstan's binary selects
// the Temporal floor.
const temporalModule = "go.temporal.io/sdk"

func capstanBinary(tb testing.TB) binary {
	return binary{name: "capstan", dir: moduleRoot(tb), pkg: "./cmd/capstan"}
}

// floorBinary is the floor CLI; floorTemporalBinary the same file built in
// testdata/floortemporal (its own module) together with temporal.go.
func floorBinary(tb testing.TB) binary {
	return binary{name: "floor", dir: moduleRoot(tb), pkg: "./internal/bench/testdata/floorcli"}
}

func floorTemporalBinary(tb testing.TB) binary {
	dir := filepath.Join(moduleRoot(tb), "internal", "bench", "testdata", "floortemporal")
	return binary{name: "floor-temporal", dir: dir, pkg: ".", overlay: func(tb testing.TB) string {
		ov, err := json.Marshal(map[string]any{"Replace": map[string]string{
			filepath.Join(dir, "main.go"): filepath.Join(dir, "..", "floorcli", "main.go"),
		}})
		if err != nil {
			tb.Fatal(err)
		}
		p := filepath.Join(tb.TempDir(), "overlay.json")
		if err := os.WriteFile(p, ov, 0o644); err != nil {
			tb.Fatal(err)
		}
		return p
	}}
}

// linksModule reports whether the Go executable at path links module mod
// (what go version -m lists as a dep).
func linksModule(tb testing.TB, path, mod string) bool {
	tb.Helper()
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		tb.Fatalf("read build info of %s: %v", path, err)
	}
	for _, d := range info.Deps {
		if d.Path == mod {
			return true
		}
	}
	return false
}

// floors returns the floor that matches what capstan's binary links (the
// Temporal one when it links the Temporal SDK), or both with
// CAPSTAN_BENCH_FLOOR=all.
func floors(tb testing.TB) []binary {
	switch v := os.Getenv("CAPSTAN_BENCH_FLOOR"); v {
	case "all":
		return []binary{floorBinary(tb), floorTemporalBinary(tb)}
	case "":
	default:
		tb.Fatalf("CAPSTAN_BENCH_FLOOR=%s: use all, or leave it unset for the floor matching capstan's binary", v)
	}
	if linksModule(tb, build(tb, capstanBinary(tb), ""), temporalModule) {
		return []binary{floorTemporalBinary(tb)}
	}
	return []binary{floorBinary(tb)}
}

// isFloor reports whether b is one of the floors.
func isFloor(b binary) bool { return strings.HasPrefix(b.name, "floor") }

// binaries are capstan (this tree), its floor (see floors) and, with
// CAPSTAN_BENCH_BASE, capstan from another checkout.
func binaries(tb testing.TB) []binary {
	bins := append([]binary{capstanBinary(tb)}, floors(tb)...)
	if base := os.Getenv("CAPSTAN_BENCH_BASE"); base != "" {
		bins = append(bins, binary{name: "capstan-base", dir: base, pkg: "./cmd/capstan"})
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

// releaseEnv and releaseFlags are how scripts/release.sh builds capstan
// (besides GOOS, GOARCH and its -ldflags): without cgo, without the
// build machine's paths and VCS stamp. Every binary measured here is
// built with them.
var (
	releaseEnv   = []string{"CGO_ENABLED=0"}
	releaseFlags = []string{"-trimpath", "-buildvcs=false"}
)

// releaseLDFlags are the linker flags of a release that change what runs
// (the symbol table and DWARF are dropped); the start-up benchmarks build
// with them. scripts/release.sh also stamps the version with -X.
const releaseLDFlags = "-s -w"

// goBuild returns the go build command for b, built as a release is
// (releaseEnv, releaseFlags), with extra arguments before the package.
func goBuild(tb testing.TB, b binary, extra ...string) *exec.Cmd {
	args := append([]string{"build"}, releaseFlags...)
	args = append(args, extra...)
	if b.overlay != nil {
		args = append(args, "-overlay="+b.overlay(tb))
	}
	cmd := exec.Command("go", append(args, b.pkg)...)
	cmd.Dir = b.dir
	cmd.Env = append(os.Environ(), releaseEnv...)
	return cmd
}

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
	cmd := goBuild(tb, b, "-ldflags="+ldflags, "-o", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("go build %s in %s: %v\n%s", b.pkg, b.dir, err, stderr.String())
	}
	buildCache[key] = out
	return out
}

func TestMain(m *testing.M) {
	sandbox.Init() // sandboxed tools re-execute the test binary as their helper, as a user's main does
	// The agents these benchmarks build journal their runs in a state
	// directory of their own, removed at the end: the user's would gain a
	// work dir entry per agent (tens of thousands per run of the parked
	// benchmarks), and each new run's directory would be made in a folder
	// that keeps growing, which is not what a user's run pays.
	state, err := os.MkdirTemp("", "capstan-bench-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: state directory:", err)
		os.Exit(2)
	}
	os.Setenv(journal.EnvStateDir, state)
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.RemoveAll(state)
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
// and, per run, the child's CPU time and peak RSS (MiB). The binaries are
// built as a release is, stripped (releaseLDFlags).
//
//	go test ./internal/bench -run XXX -bench Startup -benchtime 50x
func BenchmarkStartup(b *testing.B) {
	root := moduleRoot(b)
	for _, bin := range binaries(b) {
		cases := [][]string{{"--help"}}
		if !isFloor(bin) {
			cases = append(cases, []string{"validate", filepath.Join(root, "examples", "hello")})
		}
		for _, args := range cases {
			b.Run(bin.name+"/"+args[0], func(b *testing.B) {
				measure(b, build(b, bin, releaseLDFlags), args...)
			})
		}
	}
}

// The floor CLI is a real client: it makes one streamed tool call with
// each SDK against the fake servers. The Temporal floor, when it is the one
// measured, also registers its workflow on a worker.
func TestFloorCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	for _, fl := range floors(t) {
		p := build(t, fl, "")
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
				t.Errorf("%s %s: %v\n%s", fl.name, d, err, out)
			}
		}
		if fl.name == "floor-temporal" {
			out, err := exec.Command(p, "temporal").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "registered greetWorkflow" {
				t.Errorf("%s temporal: %v\n%s", fl.name, err, out)
			}
		}
	}
}

// The Temporal floor is its own module; the SDKs it shares with capstan
// must be the versions capstan requires, or the two binaries would not
// contain the same code.
func TestFloorVersions(t *testing.T) {
	requires := func(dir string) map[string]string {
		cmd := exec.Command("go", "mod", "edit", "-json")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go mod edit -json in %s: %v", dir, err)
		}
		var mf struct {
			Require []struct{ Path, Version string }
		}
		if err := json.Unmarshal(out, &mf); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range mf.Require {
			m[r.Path] = r.Version
		}
		return m
	}
	capstan := requires(moduleRoot(t))
	floor := requires(floorTemporalBinary(t).dir)
	for _, mod := range []string{"github.com/anthropics/anthropic-sdk-go", "github.com/openai/openai-go/v3", "github.com/spf13/cobra", temporalModule} {
		fv, cv := floor[mod], capstan[mod]
		switch {
		case fv == "":
			t.Errorf("the Temporal floor does not require %s", mod)
		case cv != "" && cv != fv:
			t.Errorf("%s: the Temporal floor requires %s, capstan %s; align them with: (cd internal/bench/testdata/floortemporal && go get %s@%s && go mod tidy)", mod, fv, cv, mod, cv)
		}
	}
}

// TestNoReflectMethodLookup proves with the linker's own dependency dump
// (-ldflags=-dumpdep) that nothing reachable in capstan looks methods up
// by a computed name. The linker marks such functions <ReflectMethod>
// (text/template's evalField, a Handlebars library's method evaluation)
// and, when one is reachable, keeps every exported method of every
// type that reaches an interface (in the floor the model SDKs' code grows
// by 1 MiB; for a type that holds an SDK client, by many more — see
// TestSDKCodeAtFloor). Calls with a
// constant name (protobuf's MethodByName("Get")) are not marked and keep
// dead-method elimination on.
//
// The Temporal SDK reaches such functions itself (its activity registry,
// and text/template through x/net/trace, which its gRPC retry middleware
// imports), so a binary that links it is held to the Temporal floor's own
// list: capstan may add no marked function of its own.
func TestNoReflectMethodLookup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "capstan")
	marked := reflectMethods(t, capstanBinary(t), out)
	allowed := map[string]bool{}
	if linksModule(t, out, temporalModule) {
		allowed = reflectMethods(t, floorTemporalBinary(t), filepath.Join(t.TempDir(), "floor-temporal"))
		if len(allowed) == 0 {
			t.Fatal("the Temporal floor has no marked function: the allowance would be empty; check the dump")
		}
	}
	for _, from := range slices.Sorted(maps.Keys(marked)) {
		if !allowed[from] {
			t.Errorf("reachable method lookup by a computed name: %s", from)
		}
	}
}

// sdkModules are the model SDKs the floor calls the same way capstan does
// (one streamed call each), so capstan should keep no more of their code
// than the floor does.
var sdkModules = []string{"github.com/anthropics/anthropic-sdk-go", "github.com/openai/openai-go/v3"}

// TestSDKCodeAtFloor compares, by the linker's symbol table, the machine
// code capstan and its floor keep of each model SDK. Both make the same
// streamed calls, so capstan may keep at most 5 % (+ 64 KiB) more. When
// dead-method elimination is off (the Temporal SDK turns it off for the
// floor too), a type that reaches an interface keeps every exported method
// of itself and of every type its fields hold: an SDK client stored in a
// struct that is used as an interface once kept every service of both
// SDKs, 25 MiB of the stripped binary. With -v it logs the packages that
// add the most code over the floor.
func TestSDKCodeAtFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries; skipped with -short")
	}
	capstan := codeByPackage(t, build(t, capstanBinary(t), ""))
	for _, fl := range floors(t) {
		floor := codeByPackage(t, build(t, fl, ""))
		for _, mod := range sdkModules {
			c, f := moduleCode(capstan, mod), moduleCode(floor, mod)
			t.Logf("%s: capstan %.2f MiB of code, %s %.2f MiB", mod, mib(c), fl.name, mib(f))
			if c > f+f/20+64<<10 {
				t.Errorf("capstan keeps %.2f MiB of %s's code, %s %.2f MiB: a capstan type that reaches an interface holds an SDK type whose methods its calls do not need; list them with: go build -ldflags=-dumpdep -o /dev/null ./cmd/capstan 2>&1 | grep '^type:[^ ]*capstan-dev[^ ]* <UsedInIface> -> type:[^ ]*%s'", mib(c), mod, fl.name, mib(f), mod)
			}
		}
		type row struct {
			pkg  string
			over int64
		}
		var rows []row
		for pkg, n := range capstan {
			if d := n - floor[pkg]; d > 0 {
				rows = append(rows, row{pkg, d})
			}
		}
		slices.SortFunc(rows, func(a, b row) int { return int(b.over - a.over) })
		var total int64
		for _, r := range rows {
			total += r.over
		}
		t.Logf("code over %s: %.2f MiB; the largest packages:", fl.name, mib(total))
		for _, r := range rows[:min(len(rows), 30)] {
			t.Logf("  %7.3f MiB  %s", mib(r.over), r.pkg)
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// moduleCode sums the code of module mod's packages.
func moduleCode(byPkg map[string]int64, mod string) int64 {
	var n int64
	for pkg, size := range byPkg {
		if pkg == mod || strings.HasPrefix(pkg, mod+"/") {
			n += size
		}
	}
	return n
}

// codeByPackage reads the executable's symbol table (go tool nm -size) and
// sums the size of its text symbols by package path; compiler-generated
// equality functions count for the package of their type.
func codeByPackage(tb testing.TB, path string) map[string]int64 {
	tb.Helper()
	out, err := exec.Command("go", "tool", "nm", "-size", path).Output()
	if err != nil {
		tb.Fatalf("go tool nm -size %s: %v", path, err)
	}
	byPkg := map[string]int64{}
	for line := range strings.Lines(string(out)) {
		// address, size, kind, then the name (which may hold spaces)
		var f []string
		rest := strings.TrimSpace(line)
		for len(f) < 3 {
			field, tail, ok := strings.Cut(rest, " ")
			if !ok {
				break
			}
			f, rest = append(f, field), strings.TrimLeft(tail, " ")
		}
		if len(f) < 3 || (f[2] != "T" && f[2] != "t") {
			continue
		}
		f = append(f, rest)
		var size int64
		if _, err := fmt.Sscan(f[1], &size); err != nil {
			tb.Fatalf("nm line %q: %v", line, err)
		}
		byPkg[symbolPackage(f[3])] += size
	}
	return byPkg
}

// symbolPackage returns the package path of a Go symbol name such as
// "github.com/x/y.(*T).M" or "type:.eq.github.com/x/y.T".
func symbolPackage(name string) string {
	name = strings.TrimPrefix(name, "type:")
	name = strings.TrimPrefix(name, ".eq.")
	name = strings.TrimLeft(name, "*[]")
	if i := strings.IndexAny(name, "([{ "); i >= 0 {
		name = name[:i]
	}
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		name = name[:slash+1+dot]
	}
	// the linker escapes dots in a path's last element (gopkg.in/yaml.v3)
	return strings.ReplaceAll(name, "%2e", ".")
}

// reflectMethods builds b with -ldflags=-dumpdep into out and returns the
// functions the linker marks <ReflectMethod>.
func reflectMethods(t *testing.T, b binary, out string) map[string]bool {
	t.Helper()
	cmd := goBuild(t, b, "-ldflags=-dumpdep", "-o", out)
	var dump bytes.Buffer
	cmd.Stderr = &dump
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build %s: %v\n%.2000s", b.name, err, dump.String())
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(&dump)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		from, _, _ := strings.Cut(sc.Text(), " -> ")
		if strings.Contains(from, "<ReflectMethod>") {
			seen[from] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
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
// doing no work) in the same run, built as BenchmarkStartup builds them.
//
//	go test ./internal/bench -run XXX -bench Validate -benchtime 30x
func BenchmarkValidate(b *testing.B) {
	dirs := map[int]string{}
	for _, n := range []int{2, 21, 200} {
		dirs[n] = agentWithSteps(b, n)
	}
	for _, bin := range binaries(b) {
		if isFloor(bin) {
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
				measure(b, build(b, bin, releaseLDFlags), r.args...)
			})
		}
	}
}

// The benchmarks build every binary the way scripts/release.sh builds a
// release; this holds the script's go build command to releaseEnv,
// releaseFlags and releaseLDFlags, so the two cannot drift apart.
func TestReleaseBuildFlags(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(moduleRoot(t), "scripts", "release.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var cmd string
	for line := range strings.Lines(string(script)) {
		if strings.Contains(line, "go build") {
			cmd = line
			break
		}
	}
	if cmd == "" {
		t.Fatal("scripts/release.sh has no go build command")
	}
	fields := strings.Fields(cmd)
	for _, want := range append(slices.Clone(releaseEnv), releaseFlags...) {
		if !slices.Contains(fields, want) {
			t.Errorf("scripts/release.sh builds with %q, which lacks %s; build the benchmarks' binaries as a release is (releaseEnv, releaseFlags)", strings.TrimSpace(cmd), want)
		}
	}
	for _, f := range strings.Fields(releaseLDFlags) {
		if !regexp.MustCompile(`(?m)^ldflags="([^"]*\s)?` + regexp.QuoteMeta(f) + `[\s"]`).Match(script) {
			t.Errorf("scripts/release.sh's ldflags lack %s (releaseLDFlags)", f)
		}
	}
}
