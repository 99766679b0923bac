package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
)

// modelArg returns the value of --model among raw `run` arguments ("" when
// absent), so its script file can be pinned with the definition before the
// agent's own flags are known.
func modelArg(args []string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return ""
		case a == "--model" && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--model="):
			return strings.TrimPrefix(a, "--model=")
		}
	}
	return ""
}

// resumeDefinition returns the agent a resumed run continues with and what
// its run.start records about that choice. By default that is the
// definition recorded with the run (refused when it is missing or does not
// match its digest); the agent folder on disk is compared with it and every
// difference is printed to w. With reload, the folder's current files are
// used instead.
func resumeDefinition(w io.Writer, rec *agent.RunRecord, reload bool, model string) (*agentdir.Agent, *agentdir.SnapshotResume, error) {
	recorded := rec.Definition()
	dir := rec.Start.AgentDir
	res := &agentdir.SnapshotResume{Reloaded: reload}
	if recorded != nil {
		res.RecordedDigest = recorded.Digest
	}
	pinned, perr := agentdir.OpenSnapshot(filepath.Dir(rec.Journal), recorded, dir)
	if perr != nil && !reload {
		return nil, nil, perr
	}
	models := []string{rec.Start.Model}
	if model != "" {
		models = append(models, model)
	}
	current, cerr := agentdir.TakeSnapshot(dir, agentdir.SnapshotOptions{Models: models})
	if reload {
		if cerr != nil {
			return nil, nil, cerr
		}
		if perr != nil {
			fmt.Fprintf(w, "capstan: %v\n", perr)
		} else {
			res.Changes = pinned.Diff(current)
		}
		fmt.Fprintf(w, "resume: --reload-definition: continuing with the agent folder's current files %s (recorded %s)\n", current.Digest(), orNone(res.RecordedDigest))
		printChanges(w, res.Changes)
		def, err := agentdir.LoadAndValidateFS(current, dir, agent.ValidateOptions())
		return def, res, err
	}
	if cerr != nil {
		res.Problem = cerr.Error()
		fmt.Fprintf(w, "resume: the agent folder %s cannot be read now (%v); continuing with the recorded definition %s\n", dir, cerr, pinned.Digest())
	} else if res.Changes = pinned.Diff(current); len(res.Changes) > 0 {
		fmt.Fprintf(w, "resume: the agent folder %s differs from the definition recorded with run %s; continuing with the recorded definition %s (pass --reload-definition to use the current files):\n", dir, rec.ID, pinned.Digest())
		printChanges(w, res.Changes)
	}
	def, err := agentdir.LoadAndValidateFS(pinned, dir, agent.ValidateOptions())
	return def, res, err
}

func printChanges(w io.Writer, changes []agentdir.SnapshotChange) {
	for _, c := range changes {
		fmt.Fprintf(w, "  %-8s %s\n", c.Kind, c.Path)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// printDefinitions prints, for `capstan show`, the digest of the definition
// a run started with and, for each resume, which definition it continued
// with. A run that recorded no definition (a skill run, or one recorded
// before definitions were pinned) prints nothing.
func printDefinitions(w io.Writer, recs []*agentdir.SnapshotRecord) {
	for i, d := range recs {
		r := d.Resume
		switch {
		case i == 0 && r == nil:
			fmt.Fprintf(w, "definition %s (%d files)\n", d.Digest, len(d.Files))
		case r == nil:
			fmt.Fprintf(w, "resumed with definition %s\n", d.Digest)
		case r.Reloaded:
			fmt.Fprintf(w, "resumed with --reload-definition: definition %s (recorded %s)\n", d.Digest, orNone(r.RecordedDigest))
		default:
			fmt.Fprintf(w, "resumed with the recorded definition %s\n", d.Digest)
		}
		if r != nil && r.Problem != "" {
			fmt.Fprintf(w, "  the agent folder could not be read: %s\n", r.Problem)
		}
		if r != nil && len(r.Changes) > 0 {
			fmt.Fprintln(w, "  the agent folder differed from the recorded definition:")
			printChanges(w, r.Changes)
		}
	}
}
