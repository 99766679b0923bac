package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// skipDirs are directories Glob and Grep never descend into: version
// control data and capstan's own run journals.
var skipDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, ".capstan": true}

// MaxGrepFileSize is the largest file Grep searches.
const MaxGrepFileSize = 16 << 20

// MaxGrepContext bounds Grep's -A, -B and -C.
const MaxGrepContext = 100

// walkFiles calls fn for each non-directory entry below dir (a slash path
// relative to the root of fsys), with its path relative to dir. It never
// follows symbolic links to directories and skips skipDirs. maxDepth > 0
// limits how deep it goes (1 = entries of dir only).
func walkFiles(ctx context.Context, fsys fs.FS, dir string, maxDepth int, fn func(rel string, d fs.DirEntry) error) error {
	return fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == dir {
				return err
			}
			return nil // unreadable entry: skip it, keep walking
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if dir == "." {
			rel = p
		}
		if d.IsDir() {
			if p == dir {
				return nil
			}
			if skipDirs[d.Name()] {
				return fs.SkipDir
			}
			if maxDepth > 0 && strings.Count(rel, "/")+1 >= maxDepth {
				return fs.SkipDir
			}
			return nil
		}
		return fn(rel, d)
	})
}

// ---- Glob ----

type globTool struct{ ws *workspace }

type globInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func (t *globTool) Kind() tool.Kind { return tool.KindRead }

func (t *globTool) Spec() tool.Spec { return globSpec() }

// globSpec is Glob's spec, made once: its description names the result limit.
var globSpec = sync.OnceValue(func() tool.Spec {
	return spec(NameGlob, fmt.Sprintf("Finds files by name pattern in the working directory, e.g. \"**/*.go\" or \"src/**/*.{ts,tsx}\" "+
		"(* within a path segment, ** across directories, {a,b} alternatives, [abc] classes). "+
		"Returns matching file paths relative to the working directory, most recently modified first (at most %d). "+
		"Does not follow symbolic links to directories and skips .git and .capstan.", MaxGlobResults), `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "The glob pattern to match file paths against"},
    "path": {"type": "string", "description": "Directory to search in, relative to the working directory (default: the working directory)"}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`)
})

type globMatch struct {
	path  string
	mtime time.Time
}

func (t *globTool) Run(ctx context.Context, input json.RawMessage) (tool.Result, error) {
	var in globInput
	if err := decode(NameGlob, input, &in, "pattern", "path"); err != nil {
		return failure(err), nil
	}
	if strings.TrimSpace(in.Pattern) == "" {
		return failure(inputErr(NameGlob, "pattern is empty")), nil
	}
	base, pattern, err := t.globBase(in)
	if err != nil {
		return failure(err), nil
	}
	baseRel, err := t.ws.rel(base)
	if err != nil {
		return failure(err), nil
	}
	// Walk from the pattern's literal prefix, through its real location.
	static, rest := doublestar.SplitPattern(pattern)
	shownDir := path.Join(filepath.ToSlash(baseRel), static)
	root, realDir, err := t.ws.openPath(shownDir)
	if err != nil {
		return failure(err), nil
	}
	defer root.Close()
	st, err := root.Stat(realDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return tool.Result{Content: "No files found"}, nil
		}
		return failure(osErr(displayPath(shownDir), err)), nil
	}
	var matches []globMatch
	if !st.IsDir() {
		if rest == "" || rest == "." {
			matches = append(matches, globMatch{path: shownDir, mtime: st.ModTime()})
		}
	} else {
		depth := 0
		if !strings.Contains(rest, "**") {
			depth = strings.Count(rest, "/") + 1
		}
		err = walkFiles(ctx, root.FS(), filepath.ToSlash(realDir), depth, func(rel string, d fs.DirEntry) error {
			if ok, _ := doublestar.Match(rest, rel); !ok {
				return nil
			}
			m := globMatch{path: path.Join(shownDir, rel)}
			if info, err := d.Info(); err == nil {
				m.mtime = info.ModTime()
			}
			matches = append(matches, m)
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return tool.Result{}, agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerTool, false, "Glob canceled")
			}
			return failure(osErr(displayPath(shownDir), err)), nil
		}
	}
	if len(matches) == 0 {
		return tool.Result{Content: "No files found"}, nil
	}
	return tool.Result{Content: capOutput(globListing(matches), t.ws.maxOut, "use a narrower pattern")}, nil
}

// globBase is the folder Glob searches from and the pattern below it: an
// absolute pattern must lie inside the work dir, and no pattern may climb
// out of it with "..".
func (t *globTool) globBase(in globInput) (base, pattern string, err error) {
	base = in.Path
	if base == "" {
		base = "."
	}
	pattern = in.Pattern
	if filepath.IsAbs(pattern) {
		// An absolute pattern must lie inside the work dir; search from
		// there.
		dir, rest := doublestar.SplitPattern(filepath.ToSlash(pattern))
		rel, err := t.ws.rel(dir)
		if err != nil {
			return "", "", err
		}
		base, pattern = rel, rest
	}
	pattern = strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(pattern)), "/")
	for _, seg := range strings.Split(filepath.ToSlash(in.Pattern), "/") {
		if seg == ".." {
			return "", "", escapeErr(in.Pattern, "pattern leaves the working directory")
		}
	}
	if !doublestar.ValidatePattern(pattern) {
		return "", "", inputErr(NameGlob, "bad glob pattern %q", in.Pattern)
	}
	return base, pattern, nil
}

// globListing lists the matches, newest first (then by path), up to
// MaxGlobResults.
func globListing(matches []globMatch) string {
	sort.Slice(matches, func(i, j int) bool {
		if !matches[i].mtime.Equal(matches[j].mtime) {
			return matches[i].mtime.After(matches[j].mtime)
		}
		return matches[i].path < matches[j].path
	})
	var b strings.Builder
	for i, m := range matches {
		if i == MaxGlobResults {
			fmt.Fprintf(&b, "[%d more files not shown; use a narrower pattern or path]\n", len(matches)-MaxGlobResults)
			break
		}
		b.WriteString(displayPath(m.path))
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ---- Grep ----

type grepTool struct{ ws *workspace }

type grepInput struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path"`
	Glob            string `json:"glob"`
	OutputMode      string `json:"output_mode"`
	CaseInsensitive bool   `json:"-i"`
	LineNumbers     *bool  `json:"-n"`
	HeadLimit       *int   `json:"head_limit"`
	After           *int   `json:"-A"`
	Before          *int   `json:"-B"`
	Context         *int   `json:"-C"`
}

// Grep output modes.
const (
	grepContent = "content"
	grepFiles   = "files_with_matches"
	grepCount   = "count"
)

func (t *grepTool) Kind() tool.Kind { return tool.KindRead }

func (t *grepTool) Spec() tool.Spec {
	return spec(NameGrep, "Searches file contents in the working directory with a regular expression (RE2 syntax, as Go's regexp). "+
		"output_mode \"files_with_matches\" (default) lists matching files, \"content\" shows matching lines as path:line:text, "+
		"\"count\" shows path:count. In content mode -A/-B/-C add context lines (path-line-text, groups separated by --). Filter files with glob (e.g. \"*.go\", \"**/*.{ts,tsx}\"). Binary files, .git and .capstan are skipped; "+
		"symbolic links to directories are not followed.", `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Regular expression (RE2) to search for"},
    "path": {"type": "string", "description": "File or directory to search, relative to the working directory (default: the working directory)"},
    "glob": {"type": "string", "description": "Only search files whose name (or path below path) matches this glob"},
    "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "What to show (default files_with_matches)"},
    "-i": {"type": "boolean", "description": "Case-insensitive search"},
    "-n": {"type": "boolean", "description": "Show line numbers in content mode (default true)"},
    "-A": {"type": "integer", "minimum": 0, "description": "Lines to show after each match (content mode)"},
    "-B": {"type": "integer", "minimum": 0, "description": "Lines to show before each match (content mode)"},
    "-C": {"type": "integer", "minimum": 0, "description": "Lines to show before and after each match (content mode)"},
    "head_limit": {"type": "integer", "minimum": 1, "description": "Show only the first N lines or entries"}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`)
}

func (t *grepTool) Run(ctx context.Context, input json.RawMessage) (tool.Result, error) {
	var in grepInput
	if err := decode(NameGrep, input, &in, "pattern", "path", "glob", "output_mode", "-i", "-n", "-A", "-B", "-C", "head_limit"); err != nil {
		return failure(err), nil
	}
	mode, limit, re, err := checkGrepInput(in)
	if err != nil {
		return failure(err), nil
	}
	numbers := in.LineNumbers == nil || *in.LineNumbers
	base := in.Path
	if base == "" {
		base = "."
	}
	shown, err := t.ws.rel(base)
	if err != nil {
		return failure(err), nil
	}
	root, realBase, err := t.ws.openPath(base)
	if err != nil {
		return failure(err), nil
	}
	defer root.Close()
	st, err := root.Stat(realBase)
	if err != nil {
		return failure(osErr(base, err)), nil
	}
	fsys := root.FS()
	out := &grepOutput{mode: mode, limit: limit, numbers: numbers, max: t.ws.maxOut}
	if err := out.setContext(in); err != nil {
		return failure(err), nil
	}
	out.contextGap = out.before > 0 || out.after > 0
	bufs := &grepBuffers{reader: bufio.NewReaderSize(nil, 16<<10), line: make([]byte, 0, 16<<10)}
	search := func(realPath, shownPath string) error {
		return grepFile(ctx, fsys, realPath, shownPath, re, out, bufs)
	}
	if !st.IsDir() {
		err = search(filepath.ToSlash(realBase), filepath.ToSlash(shown))
	} else {
		var files []string
		err = walkFiles(ctx, fsys, filepath.ToSlash(realBase), 0, func(rel string, d fs.DirEntry) error {
			if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			if in.Glob != "" {
				okName, _ := doublestar.Match(in.Glob, path.Base(rel))
				okPath, _ := doublestar.Match(in.Glob, rel)
				if !okName && !okPath {
					return nil
				}
			}
			files = append(files, rel)
			return nil
		})
		sort.Strings(files)
		for _, rel := range files {
			if err != nil || out.full() {
				break
			}
			err = search(path.Join(filepath.ToSlash(realBase), rel), path.Join(filepath.ToSlash(shown), rel))
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerTool, false, "Grep canceled")
		}
		return failure(osErr(base, err)), nil
	}
	return tool.Result{Content: out.String()}, nil
}

// setContext sets the lines of context Grep prints around a match (-C,
// then -A and -B, which override it).
func (out *grepOutput) setContext(in grepInput) error {
	for _, c := range []struct {
		name string
		v    *int
		dst  []*int
	}{{"-C", in.Context, []*int{&out.before, &out.after}}, {"-A", in.After, []*int{&out.after}}, {"-B", in.Before, []*int{&out.before}}} {
		if c.v == nil {
			continue
		}
		if *c.v < 0 || *c.v > MaxGrepContext {
			return inputErr(NameGrep, "%s must be between 0 and %d, got %d", c.name, MaxGrepContext, *c.v)
		}
		for _, d := range c.dst {
			*d = *c.v
		}
	}
	return nil
}

// checkGrepInput checks Grep's pattern, output mode, head limit and glob,
// and compiles the pattern.
func checkGrepInput(in grepInput) (mode string, limit int, re *regexp.Regexp, err error) {
	if in.Pattern == "" {
		return "", 0, nil, inputErr(NameGrep, "pattern is empty")
	}
	mode = in.OutputMode
	if mode == "" {
		mode = grepFiles
	}
	if mode != grepContent && mode != grepFiles && mode != grepCount {
		return "", 0, nil, inputErr(NameGrep, "output_mode %q is not one of content, files_with_matches, count", in.OutputMode)
	}
	if in.HeadLimit != nil {
		if *in.HeadLimit <= 0 {
			return "", 0, nil, inputErr(NameGrep, "head_limit must be positive, got %d", *in.HeadLimit)
		}
		limit = *in.HeadLimit
	}
	expr := in.Pattern
	if in.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, cerr := regexp.Compile(expr)
	if cerr != nil {
		return "", 0, nil, inputErr(NameGrep, "bad regular expression: %v", cerr)
	}
	if in.Glob != "" && !doublestar.ValidatePattern(in.Glob) {
		return "", 0, nil, inputErr(NameGrep, "bad glob %q", in.Glob)
	}
	return mode, limit, re, nil
}

// grepOutput collects Grep results up to head_limit and the output cap.
type grepOutput struct {
	mode       string
	before     int  // context lines before a match (content mode)
	after      int  // context lines after a match
	contextGap bool // print "--" between files' groups
	limit      int
	numbers    bool
	max        int
	b          strings.Builder
	entries    int
	files      int
	truncated  bool
}

func (o *grepOutput) full() bool { return o.truncated }

// add appends one output line; false when no more fit.
func (o *grepOutput) add(line string) bool {
	if o.truncated {
		return false
	}
	if (o.limit > 0 && o.entries >= o.limit) || o.b.Len()+len(line)+1 > o.max {
		o.truncated = true
		return false
	}
	o.entries++
	o.b.WriteString(line)
	o.b.WriteByte('\n')
	return true
}

func (o *grepOutput) String() string {
	if o.entries == 0 && !o.truncated {
		if o.mode == grepContent {
			return "No matches found"
		}
		return "No files found"
	}
	s := strings.TrimSuffix(o.b.String(), "\n")
	if o.truncated {
		if o.limit > 0 && o.entries >= o.limit {
			s += fmt.Sprintf("\n[stopped at head_limit %d]", o.limit)
		} else {
			s += "\n[output truncated at the size limit; narrow the pattern, path or glob, or use head_limit]"
		}
	}
	return s
}

// grepBuffers are reused for every file of one Grep call.
type grepBuffers struct {
	reader *bufio.Reader
	line   []byte
}

// heldLine is a line Grep keeps to print as context before a match.
type heldLine struct {
	n    int
	text string
}

// grepFile searches one file and adds its results to out.
func grepFile(ctx context.Context, fsys fs.FS, realPath, shownPath string, re *regexp.Regexp, out *grepOutput, bufs *grepBuffers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, ok := openForGrep(fsys, realPath)
	if !ok {
		return nil // unreadable, special, too large, or a link leading outside: skip
	}
	defer f.Close()
	br := bufs.reader
	br.Reset(f)
	defer br.Reset(nil)
	if head, _ := br.Peek(8000); isBinary(head) {
		return nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(bufs.line[:0], 1<<20)
	shown := displayPath(shownPath)
	var before []heldLine // the last out.before lines not yet printed
	count, line, printed, afterLeft := 0, 0, 0, 0
	emit := func(n int, sep, text string) bool {
		if printed > 0 && n > printed+1 && (out.before > 0 || out.after > 0) {
			if !out.add("--") {
				return false
			}
		}
		printed = n
		return out.add(out.format(shown, n, sep, text))
	}
	for sc.Scan() {
		line++
		raw := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if !re.Match(raw) {
			if out.mode != grepContent {
				continue
			}
			if afterLeft > 0 {
				afterLeft--
				if !emit(line, "-", string(raw)) {
					return nil
				}
			} else if out.before > 0 {
				if len(before) == out.before {
					before = before[1:]
				}
				before = append(before, heldLine{line, string(raw)})
			}
			continue
		}
		count++
		switch out.mode {
		case grepFiles:
			out.add(shown)
			return nil
		case grepContent:
			if out.contextGap && printed == 0 && out.entries > 0 {
				// Separate this file's lines from the previous file's.
				if !out.add("--") {
					return nil
				}
			}
			for _, h := range before {
				if h.n > printed && !emit(h.n, "-", h.text) {
					return nil
				}
			}
			before = before[:0]
			if !emit(line, ":", string(raw)) {
				return nil
			}
			afterLeft = out.after
		}
	}
	if out.mode == grepCount && count > 0 {
		out.add(fmt.Sprintf("%s:%d", displayPath(shownPath), count))
	}
	return nil
}

// openForGrep opens the regular file at realPath for Grep; a file that is
// not regular (checked before opening: opening a FIFO would block), cannot
// be read or is over MaxGrepFileSize is skipped.
func openForGrep(fsys fs.FS, realPath string) (fs.File, bool) {
	if st, err := fs.Stat(fsys, realPath); err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	f, err := fsys.Open(realPath)
	if err != nil {
		return nil, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > MaxGrepFileSize {
		f.Close()
		return nil, false
	}
	return f, true
}

// format is one output line of Grep: the file, the line number when asked
// for, and the line, cut at MaxLineLength.
func (out *grepOutput) format(shown string, n int, sep, text string) string {
	if len(text) > MaxLineLength {
		text = text[:runeStart(text, MaxLineLength)] + " … [line cut]"
	}
	if out.numbers {
		return shown + sep + strconv.Itoa(n) + sep + text
	}
	return shown + sep + text
}
