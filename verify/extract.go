package verify

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
)

// Extractor turns a validator's output into one retry-prompt param
// (a validator's extractParams names one per param). Extractors are pure
// functions.
type Extractor func(event.ValidatorOutput) any

var extractors = map[string]Extractor{
	"parseChangedFiles":   func(o event.ValidatorOutput) any { return ParseChangedFiles(o.Stdout) },
	"parseUntrackedFiles": func(o event.ValidatorOutput) any { return ParseUntrackedFiles(o.Stdout) },
	"parseTestOutput":     func(o event.ValidatorOutput) any { return ParseTestOutput(JoinedOutput(o)) },
	"parseTypeErrors":     func(o event.ValidatorOutput) any { return ParseTypeErrors(JoinedOutput(o)) },
	"parseLintErrors":     func(o event.ValidatorOutput) any { return ParseLintErrors(JoinedOutput(o)) },
	"parseFormatOutput":   func(o event.ValidatorOutput) any { return ParseFormatOutput(JoinedOutput(o)) },
	"parseStagedFiles":    func(o event.ValidatorOutput) any { return ParseStagedFiles(o.Stdout) },
	"parseUnstagedFiles":  func(o event.ValidatorOutput) any { return ParseUnstagedFiles(o.Stdout) },
	"extractFiles":        func(o event.ValidatorOutput) any { return ExtractFiles(JoinedOutput(o)) },
	"generateDiff":        func(o event.ValidatorOutput) any { return GenerateDiff(JoinedOutput(o)) },
	"parseBranchName":     func(o event.ValidatorOutput) any { return ParseBranchName(JoinedOutput(o)) },
	"parseRemoteStatus":   func(o event.ValidatorOutput) any { return ParseRemoteStatus(o) },
	"parseMergeStatus":    func(o event.ValidatorOutput) any { return ParseMergeStatus(o) },
	"errorOutput":         func(o event.ValidatorOutput) any { return ErrorOutput(o) },
	"stdout":              func(o event.ValidatorOutput) any { return o.Stdout },
	"stderr":              func(o event.ValidatorOutput) any { return o.Stderr },
	"output":              func(o event.ValidatorOutput) any { return JoinedOutput(o) },
	"exitCode":            func(o event.ValidatorOutput) any { return o.ExitCode },
}

// extractorAliases are the other names climpt agents use for extractors:
// each is the extractor it names, under a shorter spelling.
var extractorAliases = map[string]string{
	"failedTests": "parseTestOutput",
	"errors":      "parseTypeErrors",
	"files":       "extractFiles",
	"lintErrors":  "parseLintErrors",
	"lintFiles":   "extractFiles",
	"formatFiles": "parseFormatOutput",
	"diff":        "generateDiff",
}

// Extractors lists the extractor names extractParams accepts (aliases
// included), sorted.
func Extractors() []string {
	names := make([]string, 0, len(extractors)+len(extractorAliases))
	for n := range extractors {
		names = append(names, n)
	}
	for n := range extractorAliases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ExtractorAlias returns the extractor an alias stands for ("failedTests"
// → "parseTestOutput"); ok is false when name is not an alias.
func ExtractorAlias(name string) (target string, ok bool) {
	target, ok = extractorAliases[name]
	return target, ok
}

// Extract applies the named extractor (or alias); ok is false for an
// unknown name.
func Extract(name string, out event.ValidatorOutput) (v any, ok bool) {
	if target, alias := extractorAliases[name]; alias {
		name = target
	}
	f, ok := extractors[name]
	if !ok {
		return nil, false
	}
	return f(out), true
}

// JoinedOutput is a validator's stdout then its stderr, one newline between
// them when both are set.
func JoinedOutput(o event.ValidatorOutput) string {
	switch {
	case o.Stderr == "":
		return o.Stdout
	case o.Stdout == "":
		return o.Stderr
	}
	return strings.TrimRight(o.Stdout, "\n") + "\n" + o.Stderr
}

func lines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Split(s, "\n")
}

// porcelain parses git status --porcelain (v1) lines into status code and
// path (the new path of a rename or copy), unquoting C-quoted paths.
func porcelain(s string, keep func(xy string) bool) []string {
	out := []string{}
	for _, l := range lines(s) {
		if len(l) < 4 || l[2] != ' ' {
			continue
		}
		xy, rest := l[:2], l[3:]
		if strings.Trim(xy, " MTADRCU?!") != "" || !keep(xy) {
			continue // not a porcelain v1 status line
		}
		if strings.ContainsAny(xy, "RC") {
			if _, to, ok := splitRename(rest); ok {
				rest = to
			}
		}
		if p := unquoteGitPath(rest); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// splitRename splits `ORIG -> PATH`, honouring quotes around either side.
func splitRename(s string) (from, to string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		// find the closing quote of a C-quoted string
		for i := 1; i < len(s); i++ {
			if s[i] == '\\' {
				i++
				continue
			}
			if s[i] == '"' {
				if strings.HasPrefix(s[i+1:], " -> ") {
					return s[:i+1], s[i+5:], true
				}
				break
			}
		}
		return "", s, false
	}
	i := strings.Index(s, " -> ")
	if i < 0 {
		return "", s, false
	}
	return s[:i], s[i+4:], true
}

// unquoteGitPath undoes git's C-style quoting ("a\tb", "\303\251").
func unquoteGitPath(p string) string {
	if len(p) >= 2 && p[0] == '"' && p[len(p)-1] == '"' {
		if u, err := strconv.Unquote(p); err == nil {
			return u
		}
	}
	return p
}

// ParseChangedFiles returns the tracked files with changes (staged or not)
// in `git status --porcelain` output; renames give their new path.
func ParseChangedFiles(s string) []string {
	return porcelain(s, func(xy string) bool { return xy != "??" && xy != "!!" })
}

// ParseUntrackedFiles returns the untracked paths ("??") in `git status
// --porcelain` output.
func ParseUntrackedFiles(s string) []string {
	return porcelain(s, func(xy string) bool { return xy == "??" })
}

// TestFailure is one failed test and its failure message.
type TestFailure struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// ParseTestOutput extracts failed tests from test runner output: go test
// (plain, -v and -json), pytest, node's test runner (TAP and spec
// reporters) and jest. Each failure appears once, in order of appearance.
func ParseTestOutput(s string) []TestFailure {
	var text []string
	var jsonLines []string
	for _, l := range lines(s) {
		if strings.HasPrefix(strings.TrimSpace(l), `{"`) && strings.Contains(l, `"Action"`) {
			jsonLines = append(jsonLines, l)
			continue
		}
		text = append(text, l)
	}
	acc := &failures{list: []TestFailure{}, seen: map[string]int{}}
	parseGoJSON(jsonLines, acc)
	parseGoText(text, acc)
	parsePytest(text, acc)
	parseTAP(text, acc)
	parseNodeSpec(text, acc)
	parseJest(text, acc)
	parseUnittestFailures(text, acc)
	return acc.list
}

type failures struct {
	list []TestFailure
	seen map[string]int
}

func (f *failures) add(name, msg string) {
	name = strings.TrimSpace(name)
	msg = strings.TrimSpace(msg)
	if name == "" {
		return
	}
	if i, ok := f.seen[name]; ok {
		if f.list[i].Error == "" {
			f.list[i].Error = msg
		}
		return
	}
	f.seen[name] = len(f.list)
	f.list = append(f.list, TestFailure{Name: name, Error: msg})
}

// dropParents removes failures of parent tests whose only failure is a
// failing subtest ("TestX" when "TestX/case" failed and TestX has no message
// of its own).
func (f *failures) dropParents(sep string) {
	keep := []TestFailure{}
	for _, t := range f.list {
		parent := false
		if t.Error == "" {
			for _, o := range f.list {
				if strings.HasPrefix(o.Name, t.Name+sep) {
					parent = true
					break
				}
			}
		}
		if !parent {
			keep = append(keep, t)
		}
	}
	f.list = keep
	f.seen = map[string]int{}
	for i, t := range f.list {
		f.seen[t.Name] = i
	}
}

type goEvent struct {
	Action     string `json:"Action"`
	Package    string `json:"Package"`
	Test       string `json:"Test"`
	Output     string `json:"Output"`
	ImportPath string `json:"ImportPath"`
	// FailedBuild names the build that made a package fail (Go 1.24+).
	FailedBuild string `json:"FailedBuild"`
}

var goNoise = lazyre.New(`^\s*(=== (RUN|PAUSE|CONT|NAME)|--- (FAIL|PASS|SKIP):|PASS$|FAIL$|ok\s|FAIL\s|exit status \d+$|coverage:)`)

func cleanGoOutput(s string) string {
	var b []string
	for _, l := range lines(s) {
		if goNoise().MatchString(l) || strings.TrimSpace(l) == "" {
			continue
		}
		b = append(b, strings.TrimSpace(l))
	}
	return strings.Join(b, "\n")
}

func parseGoJSON(ls []string, acc *failures) {
	if len(ls) == 0 {
		return
	}
	type key struct{ pkg, test string }
	out := map[key]*strings.Builder{}
	build := map[string]*strings.Builder{}
	failedTests := map[string]bool{}
	var order []goEvent
	for _, l := range ls {
		var e goEvent
		if json.Unmarshal([]byte(strings.TrimSpace(l)), &e) != nil {
			continue
		}
		switch e.Action {
		case "output":
			k := key{e.Package, e.Test}
			if out[k] == nil {
				out[k] = &strings.Builder{}
			}
			out[k].WriteString(e.Output)
		case "build-output":
			if build[e.ImportPath] == nil {
				build[e.ImportPath] = &strings.Builder{}
			}
			build[e.ImportPath].WriteString(e.Output)
		case "fail", "build-fail":
			order = append(order, e)
			if e.Test != "" {
				failedTests[e.Package] = true
			}
		}
	}
	start := len(acc.list)
	for _, e := range order {
		switch {
		case e.Action == "build-fail":
			if b := build[e.ImportPath]; b != nil {
				acc.add(firstField(e.ImportPath)+" [build failed]", cleanGoOutput(b.String()))
			}
		case e.FailedBuild != "" && build[e.FailedBuild] != nil:
			// already reported by its build-fail event
		case e.Test != "":
			msg := ""
			if b := out[key{e.Package, e.Test}]; b != nil {
				msg = cleanGoOutput(b.String())
			}
			acc.add(e.Test, msg)
		case !failedTests[e.Package]:
			// The package failed without a failing test: build error,
			// panic in TestMain, os.Exit.
			msg := ""
			if b := out[key{e.Package, ""}]; b != nil {
				msg = cleanGoOutput(b.String())
			}
			for ip, b := range build {
				if strings.HasPrefix(ip, e.Package) && msg == "" {
					msg = cleanGoOutput(b.String())
				}
			}
			acc.add(e.Package, msg)
		}
	}
	if len(acc.list) > start {
		acc.dropParents("/")
	}
}

var (
	goFail      = lazyre.New(`^(\s*)--- FAIL: (\S+)`)
	goRun       = lazyre.New(`^=== (RUN|CONT|NAME)\s+(\S+)`)
	goBuildFail = lazyre.New(`^FAIL\s+(\S+) \[(build failed|setup failed)\]`)
	goHeader    = lazyre.New(`^# (\S+)`)
)

func parseGoText(ls []string, acc *failures) {
	start := len(acc.list)
	running := ""                    // -v: test whose output follows
	pending := map[string][]string{} // -v: output seen before "--- FAIL"
	buildOut := map[string][]string{}
	header := ""
	for i := 0; i < len(ls); i++ {
		l := ls[i]
		if m := goRun().FindStringSubmatch(l); m != nil {
			running = m[2]
			continue
		}
		if m := goHeader().FindStringSubmatch(l); m != nil {
			header = m[1]
			continue
		}
		if m := goBuildFail().FindStringSubmatch(l); m != nil {
			msg := ""
			for h, b := range buildOut {
				if strings.HasPrefix(h, m[1]) {
					msg = strings.Join(b, "\n")
				}
			}
			acc.add(m[1]+" ["+m[2]+"]", msg)
			continue
		}
		if m := goFail().FindStringSubmatch(l); m != nil {
			indent, name := len(m[1]), m[2]
			var msg []string
			j := i + 1
			for ; j < len(ls); j++ {
				n := ls[j]
				if strings.TrimSpace(n) == "" {
					continue
				}
				ind := len(n) - len(strings.TrimLeft(n, " \t"))
				if goFail().MatchString(n) || ind <= indent {
					if strings.HasPrefix(n, "panic:") && len(msg) == 0 {
						msg = append(msg, strings.TrimSpace(n))
					}
					break
				}
				msg = append(msg, strings.TrimSpace(n))
			}
			if len(msg) == 0 {
				msg = pending[name]
			}
			acc.add(name, strings.Join(msg, "\n"))
			continue
		}
		if header != "" {
			t := strings.TrimSpace(l)
			if t == "" || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "ok") || strings.HasPrefix(t, "---") || strings.HasPrefix(l, "===") {
				header = ""
			} else {
				buildOut[header] = append(buildOut[header], t)
			}
		}
		if running != "" && strings.HasPrefix(l, "    ") && !strings.HasPrefix(strings.TrimSpace(l), "---") {
			pending[running] = append(pending[running], strings.TrimSpace(l))
		}
	}
	if len(acc.list) > start {
		acc.dropParents("/")
	}
}

var (
	pytestSummary = lazyre.New(`^(FAILED|ERROR) (\S+::\S+|\S+\.py)(?: - (.*))?$`)
	pytestHeader  = lazyre.New(`^_{3,} (.+?) _{3,}$`)
)

func parsePytest(ls []string, acc *failures) {
	// Detailed sections give the full "E   ..." message; the short summary
	// gives node ids. Map section names (test_x or Class.test_x) to messages.
	details := map[string]string{}
	cur := ""
	var buf []string
	flush := func() {
		if cur != "" && len(buf) > 0 {
			details[cur] = strings.Join(buf, "\n")
		}
		buf = nil
	}
	for _, l := range ls {
		if m := pytestHeader().FindStringSubmatch(l); m != nil {
			flush()
			cur = m[1]
			continue
		}
		if cur != "" && strings.HasPrefix(l, "E ") {
			buf = append(buf, strings.TrimSpace(l[1:]))
		}
	}
	flush()
	for _, l := range ls {
		m := pytestSummary().FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		id, msg := m[2], m[3]
		short := id
		if i := strings.Index(id, "::"); i >= 0 {
			short = strings.ReplaceAll(id[i+2:], "::", ".")
		}
		if d, ok := details[short]; ok && (msg == "" || len(d) > len(msg)) {
			msg = d
		}
		acc.add(id, msg)
	}
}

var (
	tapNotOK       = lazyre.New(`^(\s*)not ok \d+(?: - )?(.*?)(?:\s+# (?:TODO|SKIP).*)?$`)
	tapSubtestsMsg = lazyre.New(`^\d+ subtests? failed$`)
)

func parseTAP(ls []string, acc *failures) {
	for i := 0; i < len(ls); i++ {
		m := tapNotOK().FindStringSubmatch(ls[i])
		if m == nil {
			continue
		}
		if strings.Contains(ls[i], "# TODO") || strings.Contains(ls[i], "# SKIP") {
			continue
		}
		indent := m[1] + "  "
		name := m[2]
		msg := ""
		if i+1 < len(ls) && strings.TrimRight(ls[i+1], " ") == indent+"---" {
			var block []string
			j := i + 2
			for ; j < len(ls); j++ {
				if strings.TrimRight(ls[j], " ") == indent+"..." {
					break
				}
				block = append(block, strings.TrimPrefix(ls[j], indent))
			}
			i = j
			var diag map[string]any
			if yamlsafe.Unmarshal([]byte(strings.Join(block, "\n")), &diag) == nil {
				if e, ok := diag["error"]; ok && e != nil {
					msg = paramText(e)
				}
			}
		}
		if tapSubtestsMsg().MatchString(strings.TrimSpace(msg)) {
			continue
		}
		acc.add(name, msg)
	}
}

var nodeSpecFail = lazyre.New(`^(\s*)✖ (.+?)(?: \([\d.]+m?s\))?$`)

func parseNodeSpec(ls []string, acc *failures) {
	var found []TestFailure
	withMsg := 0
	for i := 0; i < len(ls); i++ {
		m := nodeSpecFail().FindStringSubmatch(ls[i])
		if m == nil || strings.HasPrefix(strings.TrimSpace(m[2]), "failing tests") {
			continue
		}
		indent := len(m[1])
		var msg []string
		for j := i + 1; j < len(ls); j++ {
			n := ls[j]
			t := strings.TrimSpace(n)
			if t == "" {
				if len(msg) > 0 {
					msg = append(msg, "")
				}
				continue
			}
			if len(n)-len(strings.TrimLeft(n, " ")) <= indent || strings.HasPrefix(t, "at ") || t == "{" {
				break
			}
			msg = append(msg, t)
		}
		found = append(found, TestFailure{Name: m[2], Error: strings.TrimSpace(strings.Join(msg, "\n"))})
		if found[len(found)-1].Error != "" {
			withMsg++
		}
	}
	// A failing suite ("▶ group" … "✖ group") has no message of its own;
	// its failing tests are listed already.
	for _, f := range found {
		if f.Error != "" || withMsg == 0 {
			acc.add(f.Name, f.Error)
		}
	}
}

var (
	jestBullet = lazyre.New(`^\s*● (.+)$`)
	jestFrame  = lazyre.New(`^\s*>?\s*\d+ \|`)
)

func parseJest(ls []string, acc *failures) {
	for i := 0; i < len(ls); i++ {
		m := jestBullet().FindStringSubmatch(ls[i])
		if m == nil {
			continue
		}
		var msg []string
		for j := i + 1; j < len(ls); j++ {
			t := strings.TrimSpace(ls[j])
			if jestBullet().MatchString(ls[j]) || jestFrame().MatchString(ls[j]) || strings.HasPrefix(t, "at ") ||
				strings.HasPrefix(t, "Test Suites:") || strings.HasPrefix(t, "Tests:") {
				break
			}
			msg = append(msg, t)
		}
		acc.add(m[1], strings.Join(msg, "\n"))
	}
}

// TypeError is one compiler diagnostic.
type TypeError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

var (
	tscParen  = lazyre.New(`^(.+?)\((\d+),(\d+)\): (?:error|warning) (TS\d+): (.*)$`)
	tscPretty = lazyre.New(`^(.+?):(\d+):(\d+) - (?:error|warning) (TS\d+): (.*)$`)
	fileLCol  = lazyre.New(`^(\S.*?):(\d+):(\d+):\s*(.*)$`)
	mypyLine  = lazyre.New(`^(\S.*?\.pyi?):(\d+): error: (.*?)(?:\s+\[([\w-]+)\])?$`)
	// deno check: "TS2322 [ERROR]: message" (after "error: " in older
	// releases), then the source line, a marker and "    at file:///x.ts:3:7".
	denoHead = lazyre.New(`^(?:error: )?(TS\d+) \[ERROR\]: (.*)$`)
	denoAt   = lazyre.New(`^\s+at (?:file://)?(\S.*?):(\d+):(\d+)$`)
)

// ParseTypeErrors extracts compiler diagnostics: `file:line:col: msg`
// (go build, go vet, gopls), `file(line,col): error TSxxxx: msg`
// and `file:line:col - error TSxxxx: msg` (tsc), deno check's `TSxxxx
// [ERROR]: msg` with its `at file:///x.ts:line:col` line (the file without
// `file://`) and mypy's `file:line: error: msg [code]`.
func ParseTypeErrors(s string) []TypeError {
	out := []TypeError{}
	deno := -1 // index in out of a deno diagnostic still waiting for its "at" line
	for _, l := range lines(s) {
		l = strings.TrimRight(l, " \t")
		if m := denoHead().FindStringSubmatch(l); m != nil {
			out = append(out, TypeError{Code: m[1], Message: m[2]})
			deno = len(out) - 1
			continue
		}
		if deno >= 0 {
			if m := denoAt().FindStringSubmatch(l); m != nil {
				out[deno].File, out[deno].Line, out[deno].Column = m[1], atoi(m[2]), atoi(m[3])
				deno = -1
				continue
			}
			if l == "" || !strings.HasPrefix(l, " ") && strings.HasPrefix(l, "error: ") {
				deno = -1 // no location follows: keep the message alone
			}
			continue // the source line and its marker
		}
		if m := tscParen().FindStringSubmatch(l); m != nil {
			out = append(out, TypeError{File: m[1], Line: atoi(m[2]), Column: atoi(m[3]), Code: m[4], Message: m[5]})
		} else if m := tscPretty().FindStringSubmatch(l); m != nil {
			out = append(out, TypeError{File: m[1], Line: atoi(m[2]), Column: atoi(m[3]), Code: m[4], Message: m[5]})
		} else if m := mypyLine().FindStringSubmatch(l); m != nil {
			out = append(out, TypeError{File: m[1], Line: atoi(m[2]), Code: m[4], Message: m[3]})
		} else if m := fileLCol().FindStringSubmatch(l); m != nil && m[4] != "" {
			out = append(out, TypeError{File: strings.TrimPrefix(m[1], "vet: "), Line: atoi(m[2]), Column: atoi(m[3]), Message: m[4]})
		}
	}
	return out
}

// LintError is one linter finding.
type LintError struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column,omitempty"`
	Severity string `json:"severity,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Message  string `json:"message"`
}

var (
	lintLine     = lazyre.New(`^(\S.*?):(\d+)(?::(\d+))?:\s*(.*)$`)
	eslintSuffix = lazyre.New(`^(.*?)\s*\[(Error|Warning)/([^\]]+)\]$`)
	linterSuffix = lazyre.New(`^(.*?)\s+\(([\w-]+)\)$`)
	stylishRow   = lazyre.New(`^\s+(\d+):(\d+)\s+(error|warning)\s+(.+?)\s{2,}(\S+)$`)
)

// ParseLintErrors extracts findings from golangci-lint (`file:line:col:
// msg (linter)`), eslint's unix (`file:line:col: msg [Error/rule]`) and
// stylish formats, and go vet (`file:line:col: msg`).
func ParseLintErrors(s string) []LintError {
	out := []LintError{}
	file := ""
	for _, l := range lines(s) {
		l = strings.TrimRight(l, " \t")
		if m := stylishRow().FindStringSubmatch(l); m != nil && file != "" {
			out = append(out, LintError{File: file, Line: atoi(m[1]), Column: atoi(m[2]), Severity: m[3], Message: m[4], Rule: m[5]})
			continue
		}
		if m := lintLine().FindStringSubmatch(l); m != nil && m[4] != "" {
			e := LintError{File: strings.TrimPrefix(m[1], "vet: "), Line: atoi(m[2]), Column: atoi(m[3]), Message: m[4]}
			if s := eslintSuffix().FindStringSubmatch(e.Message); s != nil {
				e.Message, e.Severity, e.Rule = s[1], strings.ToLower(s[2]), s[3]
			} else if s := linterSuffix().FindStringSubmatch(e.Message); s != nil {
				e.Message, e.Rule = s[1], s[2]
			}
			out = append(out, e)
			continue
		}
		if l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#") && !strings.Contains(l, " ") {
			file = l // stylish file header
		} else if l == "" {
			file = ""
		}
	}
	return out
}

var formatPrefixes = []string{"[warn] ", "would reformat ", "Would reformat: ", "Diff in ", "from "}

// ParseFormatOutput lists the files a formatter check reported: gofmt -l,
// prettier --check ("[warn] file"), black/ruff ("would reformat file"),
// rustfmt ("Diff in file at line N:") and deno fmt ("from file:").
func ParseFormatOutput(s string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, l := range lines(s) {
		t := strings.TrimSpace(l)
		for _, p := range formatPrefixes {
			if strings.HasPrefix(t, p) {
				t = strings.TrimPrefix(t, p)
				break
			}
		}
		if i := strings.Index(t, " at line "); i >= 0 {
			t = t[:i]
		}
		t = strings.TrimSuffix(t, ":")
		if t == "" || strings.ContainsAny(t, " \t") || !strings.ContainsAny(t, "./") || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
