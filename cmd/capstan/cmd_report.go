package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/runreport"
	"github.com/capstan-dev/capstan/workflow"
)

// reportFlags choose how `show` and `report` render a run.
type reportFlags struct {
	format    string
	iteration int
	full      bool
	// unverified marks a run whose journal is kept inside its work dir
	// (runreport.Unverified).
	unverified bool
}

func (f *reportFlags) register(fs *pflag.FlagSet, defaultFormat string) {
	fs.StringVar(&f.format, "format", defaultFormat, "text, md (GitHub Markdown) or html (one self-contained page)")
	fs.IntVar(&f.iteration, "iteration", 0, "show only iteration N")
	fs.BoolVar(&f.full, "full", false, "show prompts and tool outputs whole instead of their first lines, and all the journal keeps of a failed validator's output")
}

// write renders the journal at path of run id in the chosen format.
func (f *reportFlags) write(w io.Writer, id, path string) error {
	render, err := f.renderer()
	if err != nil {
		return err
	}
	if ev, ok := firstEvent(path); ok && workflow.IsStart(ev) {
		return writeWorkflowAccount(w, f.format, id, path)
	}
	acct, err := runreport.Load(id, path)
	if err != nil {
		return withExit(exitInternal, err)
	}
	acct.Unverified = f.unverified
	if err := render(w, acct, runreport.Options{Iteration: f.iteration, Full: f.full}); err != nil {
		return withExit(exitUsage, err)
	}
	return nil
}

func (f *reportFlags) renderer() (func(io.Writer, *runreport.Run, runreport.Options) error, error) {
	switch f.format {
	case "text":
		return runreport.WriteText, nil
	case "md", "markdown":
		return runreport.WriteMarkdown, nil
	case "html":
		return runreport.WriteHTML, nil
	}
	return nil, withExit(exitUsage, fmt.Errorf("--format %q: want text, md or html", f.format))
}

func newReportCmd() *cobra.Command {
	var workDir, output string
	var html bool
	var view reportFlags
	cmd := &cobra.Command{
		Use:   "report RUN [--html] [-o FILE]",
		Short: "Write one run as a self-contained HTML page (timeline, tool calls, validator results, retry prompts, tokens and cost)",
		Long: `Write one run as a report file. With --html (the default format) the
report is one self-contained HTML page: a timeline with one row per
iteration whose prompt, model text, tool calls, validator results and retry
prompt expand in place, and tokens and cost per iteration as a small chart.
The page loads nothing from the network and runs no script.

The file is written whole or not at all. Default: report-<run-id>.html in
the current directory; -o - writes to stdout.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeRunIDs(&workDir),
		RunE: func(cmd *cobra.Command, args []string) error {
			if html {
				view.format = "html"
			}
			rec, _, legacy, err := loadShownRun(workDir, args[0])
			if err != nil {
				return err
			}
			view.unverified = legacy
			var buf bytes.Buffer
			if err := view.write(&buf, rec.ID, rec.Journal); err != nil {
				return err
			}
			if output == "-" {
				if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
					return withExit(exitInternal, err)
				}
				if err := journalProblem(rec); err != nil {
					return withExit(exitInternal, err)
				}
				return nil
			}
			ext := map[string]string{"html": ".html", "md": ".md", "markdown": ".md"}[view.format]
			if ext == "" {
				ext = ".txt"
			}
			name := "report-" + rec.ID + ext
			if output == "" {
				output = name
				if err := checkDefaultOutput(output); err != nil {
					return withExit(exitUsage, err)
				}
			}
			to := outputTo{path: output, name: name, rerun: reportRerun(cmd, rec.ID)}
			if err := to.check(); err != nil {
				return withExit(exitUsage, err)
			}
			if err := writeFileAtomic(output, buf.Bytes()); err != nil {
				if errors.Is(err, errCannotCreate) {
					return withExit(exitUsage, to.error("write it elsewhere: "+to.rerun(name), "%s", err))
				}
				return withExit(exitInternal, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", output)
			// A forged or damaged journal is reported, never as a clean one.
			if err := journalProblem(rec); err != nil {
				return withExit(exitInternal, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "also find runs an older capstan kept under <workdir>/.capstan/runs")
	cmd.Flags().BoolVar(&html, "html", false, "write HTML (same as --format html)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (default report-<run-id>.<ext>; - for stdout)")
	view.register(cmd.Flags(), "html")
	return cmd
}

// outputTo is where report writes: path (-o), the name it would pick
// (name) and the command that writes the report to another path (rerun).
type outputTo struct {
	path, name string
	rerun      func(output string) string
}

// check refuses, before anything is written, an -o FILE whose folder does
// not exist or is a file, or that is a folder, with the command that
// writes the report.
func (o outputTo) check() error {
	if fi, err := os.Stat(o.path); err == nil && fi.IsDir() {
		return o.error("write it into that directory: "+o.rerun(filepath.Join(o.path, o.name)), "it is a directory")
	}
	dir := filepath.Dir(o.path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return o.error("create the directory first: mkdir -p "+shellQuote(dir)+" && "+o.rerun(o.path), "the directory %s does not exist", dir)
	case err != nil:
		return o.error("write it elsewhere: "+o.rerun(o.name), "cannot read the directory %s: %v", dir, err)
	case !fi.IsDir():
		return o.error("write it elsewhere: "+o.rerun(o.name), "%s is a file, not a directory", dir)
	}
	return nil
}

// error is a coded usage error about -o: what is wrong and what to do.
func (o outputTo) error(hint, format string, args ...any) error {
	e := agenterr.New(agenterr.CodeUsage, agenterr.LayerLifecycle, false, "-o %s: "+format, append([]any{o.path}, args...)...)
	e.Hint = hint
	return e
}

// reportRerun returns the command that runs this capstan report of run id
// again with -o output and its other flags as given.
func reportRerun(cmd *cobra.Command, id string) func(output string) string {
	return func(output string) string {
		parts := []string{"capstan", "report", shellQuote(id)}
		cmd.Flags().Visit(func(f *pflag.Flag) {
			if f.Name != "output" {
				parts = append(parts, "--"+f.Name+"="+shellQuote(f.Value.String()))
			}
		})
		return strings.Join(append(parts, "-o", shellQuote(output)), " ")
	}
}

// errCannotCreate is in writeFileAtomic's error when the file cannot be
// created where it is to be (a read-only or special file system, no
// permission).
var errCannotCreate = errors.New("cannot create a file there")

// checkDefaultOutput refuses the name report picked itself when it is
// already there as anything but a regular file: the folder may be the
// agent's work dir, and a link planted there must not make capstan write
// the file it names (nor a FIFO hang it). A user who names that path with
// -o gets what -o does.
func checkDefaultOutput(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s exists and is not a regular file (%s); hint: remove it, or name the file to write with -o FILE", path, fi.Mode().Type())
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place, so path is never left half-written. A path that leads
// through a symbolic link is written at the file the link names (the link
// stays), and one that names an existing file that is not a regular file
// (/dev/null, /dev/stdout, a FIFO) is written to as it is: a rename would
// put a regular file in place of the device.
func writeFileAtomic(path string, data []byte) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		fi, err := os.Stat(real)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if !fi.Mode().IsRegular() {
			return writeInPlace(path, data)
		}
		path = real
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		if pe := (*os.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the temporary file's name is no concern of the user's
		}
		return fmt.Errorf("%w: %w", errCannotCreate, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeInPlace writes data to the existing file path that is not a regular
// file (a device, a FIFO, a terminal), without creating or replacing it.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// completeRunIDs completes run IDs (newest first) for shell completion of
// show, report and resume: the runs of *workDir first, then every other
// run in the state directory.
func completeRunIDs(workDir *string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		store, err := runStore()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var ids []string
		seen := map[string]bool{}
		add := func(runs []journal.Run) {
			for _, r := range runs {
				if !seen[r.ID] {
					seen[r.ID] = true
					ids = append(ids, r.ID)
				}
			}
		}
		if runs, err := store.List(*workDir); err == nil {
			add(runs)
		}
		if runs, err := store.ListAll(); err == nil {
			add(runs)
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}
