package builtin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/capstan-dev/capstan/internal/regularfile"
	"github.com/capstan-dev/capstan/tool"
)

// ---- Read ----

type readTool struct{ ws *workspace }

type readInput struct {
	FilePath string `json:"file_path"`
	Offset   *int   `json:"offset"`
	Limit    *int   `json:"limit"`
}

func (t *readTool) Kind() tool.Kind { return tool.KindRead }

func (t *readTool) Spec() tool.Spec {
	return spec(NameRead, "Reads a text file in the working directory. Returns its lines numbered like `cat -n` (line number, tab, text). "+
		"By default up to 2000 lines from the start; use offset (1-based line number) and limit to read other parts of long files. "+
		"Lines longer than 2000 characters are cut. Binary files are reported, not shown.", `{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "Path of the file, relative to the working directory (or absolute inside it)"},
    "offset": {"type": "integer", "minimum": 1, "description": "Line number to start reading from (1-based)"},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read"}
  },
  "required": ["file_path"],
  "additionalProperties": false
}`)
}

func (t *readTool) Run(_ context.Context, input json.RawMessage) (tool.Result, error) {
	var in readInput
	if err := decode(NameRead, input, &in, "file_path", "offset", "limit"); err != nil {
		return failure(err), nil
	}
	offset, limit := 1, DefaultReadLimit
	if in.Offset != nil {
		if *in.Offset < 0 {
			return failure(inputErr(NameRead, "offset must be a positive line number, got %d", *in.Offset)), nil
		}
		if *in.Offset > 0 {
			offset = *in.Offset
		}
	}
	if in.Limit != nil {
		if *in.Limit <= 0 {
			return failure(inputErr(NameRead, "limit must be positive, got %d", *in.Limit)), nil
		}
		limit = *in.Limit
	}
	root, rel, err := t.ws.openPath(in.FilePath)
	if err != nil {
		return failure(err), nil
	}
	defer root.Close()
	// A FIFO must not block the read.
	f, st, err := regularfile.Open(root.OpenFile, rel)
	var nr *regularfile.NotRegularError
	switch {
	case errors.As(err, &nr) && nr.Info.IsDir():
		return failure(inputErr(NameRead, "%s is a directory; use Glob to list files", in.FilePath)), nil
	case nr != nil:
		return failure(inputErr(NameRead, "%s is not a regular file (%s)", in.FilePath, nr.Info.Mode().Type())), nil
	case err != nil:
		return failure(osErr(in.FilePath, err)), nil
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 16<<10)
	head, _ := br.Peek(8000)
	if isBinary(head) {
		return tool.Result{Content: fmt.Sprintf("%s is a binary file (%d bytes); Read shows text files only.", in.FilePath, st.Size())}, nil
	}
	if st.Size() == 0 {
		return tool.Result{Content: fmt.Sprintf("%s exists and is empty.", in.FilePath)}, nil
	}
	out, line, more, err := readNumberedLines(br, offset, limit, t.ws.maxOut)
	if err != nil {
		return failure(osErr(in.FilePath, err)), nil
	}
	if line < offset {
		return failure(inputErr(NameRead, "%s has %d lines; offset %d is past the end", in.FilePath, line, offset)), nil
	}
	s := string(out)
	if len(s) > t.ws.maxOut {
		return tool.Result{Content: capOutput(s, t.ws.maxOut, "use offset and limit to read the rest")}, nil
	}
	if more {
		s += fmt.Sprintf("[more lines follow; continue with offset %d]\n", offset+strings.Count(s, "\n"))
	}
	return tool.Result{Content: s}, nil
}

// readNumberedLines reads limit lines from line offset on, numbered, until
// the output passes maxOut bytes; more says whether lines follow; line is
// the number of the last line read.
func readNumberedLines(br *bufio.Reader, offset, limit, maxOut int) (out []byte, line int, more bool, err error) {
	var buf []byte
	for {
		var err error
		buf, err = readLine(br, MaxLineLength, buf[:0])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, line, false, err
		}
		line++
		if line < offset {
			continue
		}
		if line >= offset+limit {
			more = true
			break
		}
		out = appendNumbered(out, line, buf)
		if len(out) > maxOut {
			more = true
			break
		}
	}
	return out, line, more, nil
}

// readLine appends one line to dst without its newline (and a trailing
// "\r"), keeping at most max bytes of it and marking a cut. It returns
// io.EOF only when no bytes were left.
func readLine(br *bufio.Reader, max int, dst []byte) ([]byte, error) {
	start := len(dst)
	sawAny := false
	for {
		// Keep up to max+2 bytes: enough to tell a line of exactly max
		// bytes ending in "\r\n" from a longer one.
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			sawAny = true
		}
		if room := max + 2 - (len(dst) - start); room > 0 {
			dst = append(dst, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && !sawAny {
			return dst, io.EOF
		}
		if err != nil && err != io.EOF {
			return dst, err
		}
		break
	}
	line := dst[start:]
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > max {
		keep := runeStart(string(line), max)
		return append(dst[:start+keep], " … [line cut]"...), nil
	}
	return dst[:start+len(line)], nil
}

// appendNumbered appends "%6d\t<text>\n".
func appendNumbered(dst []byte, n int, text []byte) []byte {
	num := strconv.Itoa(n)
	for i := len(num); i < 6; i++ {
		dst = append(dst, ' ')
	}
	dst = append(dst, num...)
	dst = append(dst, '\t')
	dst = append(dst, text...)
	return append(dst, '\n')
}

// ---- Write ----

type writeTool struct{ ws *workspace }

type writeInput struct {
	FilePath string  `json:"file_path"`
	Content  *string `json:"content"`
}

func (t *writeTool) Kind() tool.Kind { return tool.KindEdit }

func (t *writeTool) Spec() tool.Spec {
	return spec(NameWrite, "Writes a file in the working directory, replacing it if it exists and creating parent directories as needed. "+
		"The write is atomic and keeps an existing file's permissions. Prefer Edit to change part of an existing file.", `{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "Path of the file, relative to the working directory (or absolute inside it)"},
    "content": {"type": "string", "description": "The complete new content of the file"}
  },
  "required": ["file_path", "content"],
  "additionalProperties": false
}`)
}

func (t *writeTool) Run(_ context.Context, input json.RawMessage) (tool.Result, error) {
	var in writeInput
	if err := decode(NameWrite, input, &in, "file_path", "content"); err != nil {
		return failure(err), nil
	}
	if in.Content == nil {
		return failure(inputErr(NameWrite, "content is required (use \"\" for an empty file)")), nil
	}
	root, rel, err := t.ws.openPath(in.FilePath)
	if err != nil {
		return failure(err), nil
	}
	defer root.Close()
	if err := t.ws.refuseProtected(NameWrite, rel, in.FilePath); err != nil {
		return failure(err), nil
	}
	created, err := writeAtomic(root, rel, in.FilePath, []byte(*in.Content))
	if err != nil {
		return failure(err), nil
	}
	verb := "Updated"
	if created {
		verb = "Created"
	}
	return tool.Result{Content: fmt.Sprintf("%s %s (%d bytes).", verb, displayPath(rel), len(*in.Content))}, nil
}

// writeAtomic replaces rel with data through a temporary file in the same
// directory and a rename, keeping an existing file's permission bits. A
// failure leaves the old file as it was. It reports whether the file was
// created.
func writeAtomic(root *os.Root, rel, shown string, data []byte) (bool, error) {
	if rel == "." {
		return false, inputErr(NameWrite, "%s is the working directory itself, not a file", shown)
	}
	mode := fs.FileMode(0o644)
	created := true
	owner := (*syscall.Stat_t)(nil)
	if st, err := root.Stat(rel); err == nil {
		if st.IsDir() {
			return false, inputErr(NameWrite, "%s is a directory", shown)
		}
		if !st.Mode().IsRegular() {
			return false, inputErr(NameWrite, "%s is not a regular file", shown)
		}
		mode, created = st.Mode().Perm(), false
		owner, _ = st.Sys().(*syscall.Stat_t)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, osErr(shown, err)
	}
	dir := filepath.Dir(rel)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return false, osErr(shown, err)
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := filepath.Base(rel)
	if len(name) > 100 {
		name = name[:100] // keep the temporary name within NAME_MAX
	}
	tmp := filepath.Join(dir, "."+name+".capstan-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, osErr(shown, err)
	}
	cleanup := func(e error) (bool, error) {
		f.Close()
		_ = root.Remove(tmp)
		return false, osErr(shown, e)
	}
	if _, err := f.Write(data); err != nil {
		return cleanup(err)
	}
	if err := f.Chmod(mode); err != nil {
		return cleanup(err)
	}
	if owner != nil && (int(owner.Uid) != os.Geteuid() || int(owner.Gid) != os.Getegid()) {
		// Keep the owner when allowed (capstan running as root); otherwise
		// the file becomes capstan's, as with any editor that renames.
		_ = f.Chown(int(owner.Uid), int(owner.Gid))
	}
	if err := f.Sync(); err != nil {
		return cleanup(err)
	}
	if err := f.Close(); err != nil {
		_ = root.Remove(tmp)
		return false, osErr(shown, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		return false, osErr(shown, err)
	}
	return created, nil
}

// ---- Edit ----

type editTool struct{ ws *workspace }

type editInput struct {
	FilePath   string  `json:"file_path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
}

func (t *editTool) Kind() tool.Kind { return tool.KindEdit }

func (t *editTool) Spec() tool.Spec {
	return spec(NameEdit, "Replaces exact text in a file in the working directory. old_string must occur exactly once "+
		"(include enough surrounding lines to make it unique) unless replace_all is true. Match the file's text exactly, "+
		"including indentation, without the line-number prefix Read shows. An empty old_string creates a new file.", `{
  "type": "object",
  "properties": {
    "file_path": {"type": "string", "description": "Path of the file, relative to the working directory (or absolute inside it)"},
    "old_string": {"type": "string", "description": "The exact text to replace"},
    "new_string": {"type": "string", "description": "The text to put in its place (must differ from old_string)"},
    "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence of old_string"}
  },
  "required": ["file_path", "old_string", "new_string"],
  "additionalProperties": false
}`)
}

func (t *editTool) Run(_ context.Context, input json.RawMessage) (tool.Result, error) {
	var in editInput
	if err := decode(NameEdit, input, &in, "file_path", "old_string", "new_string", "replace_all"); err != nil {
		return failure(err), nil
	}
	if in.OldString == nil || in.NewString == nil {
		return failure(inputErr(NameEdit, "old_string and new_string are required")), nil
	}
	oldS, newS := *in.OldString, *in.NewString
	if oldS == newS {
		return failure(inputErr(NameEdit, "old_string and new_string are identical; nothing to change")), nil
	}
	root, rel, err := t.ws.openPath(in.FilePath)
	if err != nil {
		return failure(err), nil
	}
	defer root.Close()
	if err := t.ws.refuseProtected(NameEdit, rel, in.FilePath); err != nil {
		return failure(err), nil
	}
	st, exists, err := editTarget(root, rel, in.FilePath)
	if err != nil {
		return failure(err), nil
	}
	if oldS == "" {
		if exists && st.Size() > 0 {
			return failure(inputErr(NameEdit, "old_string is empty but %s already has content; give the text to replace, or use Write to replace the whole file", in.FilePath)), nil
		}
		if _, err := writeAtomic(root, rel, in.FilePath, []byte(newS)); err != nil {
			return failure(err), nil
		}
		return tool.Result{Content: fmt.Sprintf("Created %s (%d bytes).", displayPath(rel), len(newS))}, nil
	}
	if !exists {
		return failure(osErr(in.FilePath, fs.ErrNotExist)), nil
	}
	if st.Size() > MaxEditFileSize {
		return failure(inputErr(NameEdit, "%s is %d bytes; Edit changes files up to %d bytes", in.FilePath, st.Size(), MaxEditFileSize)), nil
	}
	data, err := root.ReadFile(rel)
	if err != nil {
		return failure(osErr(in.FilePath, err)), nil
	}
	if isBinary(data[:min(len(data), 8000)]) {
		return failure(inputErr(NameEdit, "%s is a binary file; Edit changes text files only", in.FilePath)), nil
	}
	content := string(data)
	n := strings.Count(content, oldS)
	if n == 0 {
		oldS, newS, n = matchCRLF(content, oldS, newS)
	}
	switch {
	case n == 0:
		e := inputErr(NameEdit, "old_string was not found in %s", in.FilePath)
		e.Hint = "Read the file and copy the text exactly, including whitespace and indentation"
		return failure(e), nil
	case n > 1 && !in.ReplaceAll:
		e := inputErr(NameEdit, "old_string occurs %d times in %s", n, in.FilePath)
		e.Hint = "add surrounding lines to make it unique, or set replace_all to true"
		return failure(e), nil
	}
	firstLine := strings.Count(content[:strings.Index(content, oldS)], "\n") + 1
	if in.ReplaceAll {
		content = strings.ReplaceAll(content, oldS, newS)
	} else {
		content = strings.Replace(content, oldS, newS, 1)
	}
	if _, err := writeAtomic(root, rel, in.FilePath, []byte(content)); err != nil {
		return failure(err), nil
	}
	plural := "replacement"
	if n != 1 {
		plural += "s"
	}
	return tool.Result{Content: fmt.Sprintf("Edited %s: %d %s (first at line %d).", displayPath(rel), n, plural, firstLine)}, nil
}

// editTarget is the file Edit changes, if it exists: a directory or another
// file that is not regular is refused.
func editTarget(root *os.Root, rel, path string) (fs.FileInfo, bool, error) {
	st, err := root.Stat(rel)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, osErr(path, err)
	}
	if exists && st.IsDir() {
		return nil, false, inputErr(NameEdit, "%s is a directory", path)
	}
	if exists && !st.Mode().IsRegular() {
		return nil, false, inputErr(NameEdit, "%s is not a regular file (%s)", path, st.Mode().Type())
	}
	return st, exists, nil
}

// matchCRLF finds oldS in a file with CRLF lines: Read shows CRLF lines
// without their "\r", so the text is matched as the file stores it and the
// replacement keeps the file's line endings. n is how often it occurs.
func matchCRLF(content, oldS, newS string) (string, string, int) {
	if strings.Contains(content, "\r\n") && strings.Contains(oldS, "\n") && !strings.Contains(oldS, "\r") {
		crOld := strings.ReplaceAll(oldS, "\n", "\r\n")
		if c := strings.Count(content, crOld); c > 0 {
			return crOld, strings.ReplaceAll(strings.ReplaceAll(newS, "\r\n", "\n"), "\n", "\r\n"), c
		}
	}
	return oldS, newS, 0
}
