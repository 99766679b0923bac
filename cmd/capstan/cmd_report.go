package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/runreport"
)

// reportFlags choose how `show` and `report` render a run.
type reportFlags struct {
	format    string
	iteration int
	full      bool
}

func (f *reportFlags) register(fs *pflag.FlagSet, defaultFormat string) {
	fs.StringVar(&f.format, "format", defaultFormat, "text, md (GitHub Markdown) or html (one self-contained page)")
	fs.IntVar(&f.iteration, "iteration", 0, "show only iteration N")
	fs.BoolVar(&f.full, "full", false, "show prompts and tool outputs whole instead of their first lines")
}

// write renders the run journal in the chosen format.
func (f *reportFlags) write(w io.Writer, run journal.Run) error {
	render, err := f.renderer()
	if err != nil {
		return err
	}
	acct, err := runreport.Load(run.ID, run.Path)
	if err != nil {
		return withExit(exitInternal, err)
	}
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
			run, err := journal.Find(workDir, args[0])
			if err != nil {
				return withExit(exitUsage, err)
			}
			var buf bytes.Buffer
			if err := view.write(&buf, run); err != nil {
				return err
			}
			if output == "-" {
				_, err := cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if output == "" {
				ext := map[string]string{"html": ".html", "md": ".md", "markdown": ".md"}[view.format]
				if ext == "" {
					ext = ".txt"
				}
				output = "report-" + run.ID + ext
			}
			if err := writeFileAtomic(output, buf.Bytes()); err != nil {
				return withExit(exitInternal, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", output)
			return nil
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "work dir whose .capstan/runs holds the run")
	cmd.Flags().BoolVar(&html, "html", false, "write HTML (same as --format html)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (default report-<run-id>.<ext>; - for stdout)")
	view.register(cmd.Flags(), "html")
	return cmd
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place, so path is never left half-written.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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

// completeRunIDs completes the run IDs recorded under *workDir (newest
// first), for shell completion of show, report and resume.
func completeRunIDs(workDir *string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		runs, err := journal.List(*workDir)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ids := make([]string, 0, len(runs))
		for _, r := range runs { // journal.List is newest first
			ids = append(ids, r.ID)
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}
