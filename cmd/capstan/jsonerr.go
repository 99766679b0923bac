package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// errorJSON is what a command given --json prints on stdout when it fails
// before it printed its own JSON: the error and the exit code, so a script
// that reads stdout always has one JSON value to parse.
type errorJSON struct {
	Error    errorDetail `json:"error"`
	ExitCode int         `json:"exitCode"`
}

// errorDetail is an error as --json prints it. Code is the error's code
// (CONFIG_INVALID, SDK_AUTH, …); an error without one is USAGE (exit 2) or
// INTERNAL (exit 3). File is named from the current directory, as the
// message on stderr names it. Problems lists every problem of an invalid
// agent folder, as `capstan validate --json` lists its errors.
type errorDetail struct {
	Code     string             `json:"code"`
	Message  string             `json:"message"`
	File     string             `json:"file,omitempty"`
	Line     int                `json:"line,omitempty"`
	Column   int                `json:"column,omitempty"`
	Pointer  string             `json:"pointer,omitempty"`
	Hint     string             `json:"hint,omitempty"`
	Problems []agentdir.Problem `json:"problems,omitempty"`
}

// printedError is an error a command has already printed on stderr (an
// invalid agent folder's problems, one a line): main prints nothing more,
// but --json still reports it.
type printedError struct {
	err error
	dir string // the agent folder the problems' files are relative to
}

func (e *printedError) Error() string { return e.err.Error() }
func (e *printedError) Unwrap() error { return e.err }

// configError prints err, a configuration error of the agent folder dir,
// with every problem (see printConfigError) and returns it as a usage
// error.
func configError(w io.Writer, err error, dir string, onDisk bool) error {
	printConfigError(w, err, dir, onDisk)
	return withExit(exitUsage, &printedError{err: err, dir: dir})
}

// describeError is err as --json prints it, for a command that exits with
// code.
func describeError(err error, code int) errorDetail {
	if err == nil {
		return errorDetail{Code: fallbackCode(code), Message: fmt.Sprintf("exit %d", code)}
	}
	var pe *printedError
	if errors.As(err, &pe) {
		var ve *agentdir.ValidationError
		if errors.As(pe.err, &ve) {
			d := errorDetail{Code: agenterr.CodeConfigurationValidation,
				Message: fmt.Sprintf("the agent definition is invalid (%s)", plural(len(ve.Result.Errors()), "error"))}
			for _, p := range ve.Result.Errors() {
				if p.File != "" && pe.dir != "" {
					p.File = filepath.Join(pe.dir, p.File) // as problemLine names it
				}
				d.Problems = append(d.Problems, p)
			}
			if pe.dir != "" {
				d.Hint = "check the folder with: capstan validate " + shellQuote(pe.dir)
			}
			return d
		}
		err = inFolder(pe.err, pe.dir)
	}
	e := agenterr.From(err)
	if e == nil {
		return errorDetail{Code: fallbackCode(code), Message: err.Error()}
	}
	own := e.Message
	if e.Err != nil {
		own += ": " + e.Err.Error()
	}
	// A command's prefix ("skills run: …") stays; the code, location
	// and hint have fields of their own.
	msg := strings.Replace(err.Error(), e.Error(), own, 1)
	return errorDetail{Code: e.Code, Message: msg, File: e.File, Line: e.Line, Column: e.Column, Pointer: e.Pointer, Hint: e.Hint}
}

// fallbackCode is the code of an error that has none, by its exit code.
func fallbackCode(exit int) string {
	if exit == exitUsage {
		return agenterr.CodeUsage
	}
	return "INTERNAL"
}

// wantsJSON reports whether cmd was given --json. run parses its flags
// itself (they depend on the agent), and a command whose flags did not
// parse stopped before reading them, so the words are read too.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	if f == nil {
		return false
	}
	if f.Changed {
		return f.Value.String() == "true"
	}
	// The last --json given wins, as when the flags parse; its value is
	// read as pflag reads a bool.
	want := false
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" {
			want = true
		} else if v, ok := strings.CutPrefix(a, "--json="); ok {
			want, _ = strconv.ParseBool(v)
		}
	}
	return want
}

// writeErrorJSON prints err as errorJSON.
func writeErrorJSON(w io.Writer, err error, code int) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(errorJSON{Error: describeError(err, code), ExitCode: code})
}

// watchedWriter is stdout, remembering whether a command wrote to it.
type watchedWriter struct {
	w       io.Writer
	written bool
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.written = true
	}
	return w.w.Write(p)
}
