package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readmeBlock is one ```sh block of a README: its command lines, and the
// ```text block the README shows right after it as their output.
type readmeBlock struct {
	commands []string
	output   *string
}

// readmeBlocks are the shell blocks of the README at path, in order.
func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	var fence string
	var body []string
	afterSh := false
	for _, line := range strings.Split(readFileT(t, path), "\n") {
		switch {
		case fence == "" && (line == "```sh" || line == "```text"):
			fence, body = line, nil
		case fence != "" && line == "```":
			if fence == "```sh" {
				var cmds []string
				for _, l := range body {
					if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
						cmds = append(cmds, l)
					}
				}
				blocks = append(blocks, readmeBlock{commands: cmds})
				afterSh = true
			} else if afterSh {
				out := strings.Join(body, "\n")
				blocks[len(blocks)-1].output = &out
				afterSh = false
			}
			fence = ""
		case fence != "":
			body = append(body, line)
		case strings.TrimSpace(line) != "":
			afterSh = false
		}
	}
	return blocks
}

// readmeVariable are the parts of a README's shown output that differ
// from run to run: run ids and the temporary directories mktemp made.
var readmeVariable = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{8}T\d{6}Z-[0-9a-f]{6}`), "RUN"},
	{regexp.MustCompile(`[^\s"']*/tmp\.[A-Za-z0-9]+`), "TMP"},
}

func readmeNormal(s string) string {
	for _, v := range readmeVariable {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return strings.TrimRight(s, "\n")
}

// treeDigest is a digest of every file's path and content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", p, len(b), b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestWorkflowExampleREADME pastes the shell blocks of
// examples/workflow/README.md as a stranger would — one sh session
// started in the repository root, capstan on PATH, a HOME of its own, no
// capstan, XDG or git settings in the environment — and checks that each
// block prints what the README shows after it (run ids and temporary
// directories aside), each command's exit code, what the runs left in the
// copies, and that the example's own files did not change.
func TestWorkflowExampleREADME(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "workflow")
	before := treeDigest(t, example)
	blocks := readmeBlocks(t, filepath.Join(example, "README.md"))

	// The commands the README must have, and the exit code of each that
	// does not exit 0.
	var all []string
	for _, b := range blocks {
		all = append(all, b.commands...)
	}
	for _, want := range []string{"capstan workflow validate ", " --dry-run", "capstan workflow run --issue 1 --local issues", "capstan show "} {
		if !slices.ContainsFunc(all, func(c string) bool { return strings.Contains(c, want) }) {
			t.Fatalf("the README has no command with %q:\n%s", want, strings.Join(all, "\n"))
		}
	}
	exitOf := func(cmd string) int {
		if strings.Contains(cmd, `--stub-dispatch '{"reviewer":"rejected"}'`) {
			return exitNotCompleted // cycle_exceeded
		}
		return exitOK
	}

	const marker = "::readme-exit"
	var script strings.Builder
	script.WriteString("exec 2>&1\n")
	for i, c := range all {
		fmt.Fprintf(&script, "%s\nprintf '%s %%s %d\\n' \"$?\"\n", c, marker, i)
	}
	home, tmp := t.TempDir(), t.TempDir()
	var path string
	for _, kv := range capstanOnPath(t) {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv
		}
	}
	cmd := exec.Command("sh", "-c", script.String())
	cmd.Dir, cmd.Env = root, []string{"HOME=" + home, "TMPDIR=" + tmp, path}
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, raw)
	}

	// Split the session's output into each command's.
	outputs, codes := make([]string, len(all)), make([]int, len(all))
	var cur strings.Builder
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(nil, 1<<20)
	end := regexp.MustCompile(regexp.QuoteMeta(marker) + ` (\d+) (\d+)$`)
	for sc.Scan() {
		line := sc.Text()
		m := end.FindStringSubmatchIndex(line)
		if m == nil {
			cur.WriteString(line + "\n")
			continue
		}
		cur.WriteString(line[:m[0]])
		i, _ := strconv.Atoi(line[m[4]:m[5]])
		if i != n {
			t.Fatalf("command %d ended where %d was expected:\n%s", i, n, raw)
		}
		outputs[i], codes[i] = cur.String(), 0
		codes[i], _ = strconv.Atoi(line[m[2]:m[3]])
		cur.Reset()
		n++
	}
	if n != len(all) {
		t.Fatalf("%d of %d commands ran:\n%s", n, len(all), raw)
	}
	for i, c := range all {
		if codes[i] != exitOf(c) {
			t.Errorf("%s: exit %d, want %d\n%s", c, codes[i], exitOf(c), outputs[i])
		}
	}
	i := 0
	for _, b := range blocks {
		got := strings.Join(outputs[i:i+len(b.commands)], "")
		if b.output != nil && readmeNormal(got) != readmeNormal(*b.output) {
			t.Errorf("%s\nprints:\n%s\nthe README shows:\n%s", strings.Join(b.commands, "\n"), got, *b.output)
		}
		i += len(b.commands)
	}

	// What the runs left: the copy the agents ran in has the issue closed
	// at done with the writer's and the reviewer's comments and the
	// writer's NOTES.md; the stubbed copy's issue is back at ready after
	// four moves, four comments.
	copies, _ := filepath.Glob(filepath.Join(tmp, "tmp.*", "workflow"))
	if len(copies) != 2 {
		t.Fatalf("copies %v", copies)
	}
	for _, w := range copies {
		var meta struct {
			Labels []string
			State  string
		}
		if err := json.Unmarshal([]byte(readFileT(t, filepath.Join(w, "issues", "1", "meta.json"))), &meta); err != nil {
			t.Fatal(err)
		}
		comments, _ := filepath.Glob(filepath.Join(w, "issues", "1", "comments", "*.md"))
		var texts []string
		for _, c := range comments {
			texts = append(texts, readFileT(t, c))
		}
		if _, err := os.Stat(filepath.Join(w, "NOTES.md")); err == nil {
			if strings.Join(meta.Labels, ",") != "done" || meta.State != "closed" || len(texts) != 2 ||
				!strings.HasPrefix(texts[0], "Wrote the release note: NOTES.md has") || !strings.HasPrefix(texts[1], "Review: approved.") ||
				!strings.HasPrefix(readFileT(t, filepath.Join(w, "NOTES.md")), "## 0.2.0\n") {
				t.Errorf("after the run: %+v %q", meta, texts)
			}
		} else if strings.Join(meta.Labels, ",") != "ready" || meta.State != "open" || len(texts) != 4 {
			t.Errorf("after the stubbed run: %+v %q", meta, texts)
		}
	}
	if treeDigest(t, example) != before {
		t.Error("the README's commands changed the example's files")
	}
}
