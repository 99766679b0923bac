package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// dirEnv names the fake's state directory in the script's environment.
const dirEnv = "CAPSTAN_FAKE_GH_DIR"

// GHIssue is one issue of the fake's state.
type GHIssue struct {
	Title    string   `json:"title"`
	Labels   []string `json:"labels"`
	State    string   `json:"state"`
	Comments []string `json:"comments"`
}

// GHLabel is one repository label.
type GHLabel struct {
	Color       string `json:"color"`
	Description string `json:"description"`
}

// GHState is what the fake holds.
type GHState struct {
	Issues map[string]*GHIssue `json:"issues"`
	Labels map[string]GHLabel  `json:"labels"`
	// Fail lists call prefixes ("issue close 7") that fail once each.
	Fail []string `json:"fail,omitempty"`
}

// FakeGH is an installed fake gh.
type FakeGH struct {
	// Dir holds the gh script (put it first on PATH), state.json and
	// calls.log.
	Dir string
}

// FakeGHMain runs the fake when the test binary was started as gh; it returns
// at once otherwise.
func FakeGHMain() {
	dir := os.Getenv(dirEnv)
	if dir == "" {
		return
	}
	code := run(dir, os.Args[1:])
	os.Exit(code)
}

// InstallFakeGH writes a gh script into a temporary directory that re-executes
// the test binary as the fake, with st as its state.
func InstallFakeGH(t testing.TB, st GHState) *FakeGH {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\n%s=%s exec %s \"$@\"\n", dirEnv, shellQuote(dir), shellQuote(exe))
	if err := os.WriteFile(filepath.Join(dir, "gh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &FakeGH{Dir: dir}
	if st.Issues == nil {
		st.Issues = map[string]*GHIssue{}
	}
	if st.Labels == nil {
		st.Labels = map[string]GHLabel{}
	}
	f.write(t, st)
	return f
}

func (f *FakeGH) write(t testing.TB, st GHState) {
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(f.Dir, "state.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// State reads the fake's current state.
func (f *FakeGH) State(t testing.TB) GHState {
	t.Helper()
	var st GHState
	b, err := os.ReadFile(filepath.Join(f.Dir, "state.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Calls are the recorded calls, each as its arguments joined by spaces.
func (f *FakeGH) Calls(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.Dir, "calls.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var args []string
		if line == "" || json.Unmarshal([]byte(line), &args) != nil {
			continue
		}
		out = append(out, strings.Join(args, " "))
	}
	return out
}

// Writes are the calls that change something (edit, comment, close,
// label create/edit), in order.
func (f *FakeGH) Writes(t testing.TB) []string {
	var out []string
	for _, c := range f.Calls(t) {
		if strings.HasPrefix(c, "issue edit") || strings.HasPrefix(c, "issue comment") || strings.HasPrefix(c, "issue close") ||
			strings.HasPrefix(c, "label create") || strings.HasPrefix(c, "label edit") {
			out = append(out, c)
		}
	}
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func run(dir string, args []string) int {
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	line, _ := json.Marshal(args)
	if lf, err := os.OpenFile(filepath.Join(dir, "calls.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		lf.Write(append(line, '\n'))
		lf.Close()
	}
	var st GHState
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake gh: state:", err)
		return 1
	}
	joined := strings.Join(args, " ")
	for i, f := range st.Fail {
		if strings.HasPrefix(joined, f) {
			st.Fail = slices.Delete(st.Fail, i, i+1)
			save(dir, st)
			fmt.Fprintf(os.Stderr, "fake gh: injected failure of %q\n", f)
			return 1
		}
	}
	out, code := handle(&st, args)
	save(dir, st)
	os.Stdout.WriteString(out)
	return code
}

func save(dir string, st GHState) {
	b, _ := json.MarshalIndent(st, "", "  ")
	tmp := filepath.Join(dir, "state.json.tmp")
	if os.WriteFile(tmp, b, 0o644) == nil {
		os.Rename(tmp, filepath.Join(dir, "state.json"))
	}
}

// flagValues collects the values of a repeated flag.
func flagValues(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args)-1; i++ {
		if args[i] == name {
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}

func flagValue(args []string, name string) string {
	v := flagValues(args, name)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func handle(st *GHState, args []string) (string, int) {
	if len(args) < 2 {
		return "", 2
	}
	issue := func() (*GHIssue, bool) {
		if len(args) < 3 {
			return nil, false
		}
		is, ok := st.Issues[args[2]]
		return is, ok
	}
	switch args[0] + " " + args[1] {
	case "issue view":
		is, ok := issue()
		if !ok {
			return "", 1
		}
		return viewIssue(is, args)
	case "issue edit":
		is, ok := issue()
		if !ok {
			return "", 1
		}
		for _, l := range flagValues(args, "--remove-label") {
			is.Labels = slices.DeleteFunc(is.Labels, func(x string) bool { return x == l })
		}
		for _, l := range flagValues(args, "--add-label") {
			if !slices.Contains(is.Labels, l) {
				is.Labels = append(is.Labels, l)
			}
		}
		return "", 0
	case "issue comment":
		is, ok := issue()
		if !ok {
			return "", 1
		}
		is.Comments = append(is.Comments, flagValue(args, "--body"))
		return "", 0
	case "issue close":
		is, ok := issue()
		if !ok {
			return "", 1
		}
		is.State = "closed"
		return "", 0
	case "issue list":
		return listIssues(st, args)
	case "label list":
		type l struct {
			Name        string `json:"name"`
			Color       string `json:"color"`
			Description string `json:"description"`
		}
		var ls []l
		names := make([]string, 0, len(st.Labels))
		for k := range st.Labels {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, n := range names {
			ls = append(ls, l{Name: n, Color: st.Labels[n].Color, Description: st.Labels[n].Description})
		}
		b, _ := json.Marshal(ls)
		return string(b) + "\n", 0
	case "label create", "label edit":
		if len(args) < 3 {
			return "", 2
		}
		if _, exists := st.Labels[args[2]]; exists == (args[1] == "create") {
			return "", 1
		}
		st.Labels[args[2]] = GHLabel{Color: flagValue(args, "--color"), Description: flagValue(args, "--description")}
		return "", 0
	}
	return "", 2
}

// viewIssue answers gh issue view --json labels, comments or state.
func viewIssue(is *GHIssue, args []string) (string, int) {
	switch flagValue(args, "--json") {
	case "labels":
		var b strings.Builder
		for _, l := range is.Labels {
			b.WriteString(l + "\n")
		}
		return b.String(), 0
	case "comments":
		type c struct {
			Body      string `json:"body"`
			CreatedAt string `json:"createdAt"`
		}
		var cs []c
		for i := len(is.Comments) - 1; i >= 0; i-- {
			cs = append(cs, c{Body: is.Comments[i], CreatedAt: fmt.Sprintf("2026-01-01T00:00:%02dZ", i%60)})
		}
		b, _ := json.Marshal(cs)
		return string(b) + "\n", 0
	case "state":
		b, _ := json.Marshal(map[string]string{"state": strings.ToUpper(is.State)})
		return string(b) + "\n", 0
	}
	return "", 1
}

// listIssues answers gh issue list: the issues in a state with every label
// asked for, newest first, up to --limit.
func listIssues(st *GHState, args []string) (string, int) {
	type item struct {
		Number int                 `json:"number"`
		Title  string              `json:"title"`
		Labels []map[string]string `json:"labels"`
		State  string              `json:"state"`
	}
	want := flagValues(args, "--label")
	state := flagValue(args, "--state")
	if state == "" {
		state = "open"
	}
	limit, _ := strconv.Atoi(flagValue(args, "--limit"))
	var nums []int
	for k := range st.Issues {
		n, _ := strconv.Atoi(k)
		nums = append(nums, n)
	}
	slices.Sort(nums)
	slices.Reverse(nums) // gh lists the newest first
	var items []item
	for _, n := range nums {
		is := st.Issues[strconv.Itoa(n)]
		if state != "all" && is.State != state {
			continue
		}
		ok := true
		for _, l := range want {
			ok = ok && slices.Contains(is.Labels, l)
		}
		if !ok {
			continue
		}
		it := item{Number: n, Title: is.Title, State: strings.ToUpper(is.State), Labels: []map[string]string{}}
		for _, l := range is.Labels {
			it.Labels = append(it.Labels, map[string]string{"name": l})
		}
		items = append(items, it)
		if limit > 0 && len(items) == limit {
			break
		}
	}
	b, _ := json.Marshal(items)
	return string(b) + "\n", 0
}
