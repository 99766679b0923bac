package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// oneShotGCPercent is the collector's target while validate runs. The
// command allocates a few megabytes on top of the start-up heap and exits:
// collecting in between costs more CPU than the memory it would return (the
// Go compiler raises its starting heap target for the same reason).
const oneShotGCPercent = 400

// newValidateCmd builds `capstan validate DIR [--json]`.
func newValidateCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Check an agent folder and list every problem",
		Long: `Check an agent folder (agent.json, steps_registry.json and the files they
reference) and print every problem at once, one a line:

  file:line:col: severity CODE message (pointer) — hint

Exit status: 0 valid (warnings are printed but allowed), 2 invalid.
--json prints {"valid", "errors", "warnings"} instead. Codes are documented
in docs/configuration.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer debug.SetGCPercent(debug.SetGCPercent(oneShotGCPercent))
			dir := args[0]
			res, digest, err := validateAgentDir(dir)
			if err != nil {
				return withExit(exitInternal, err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(validateJSON{Valid: res.Valid(), Errors: res.Errors(), Warnings: res.Warnings(), DefinitionDigest: digest}); err != nil {
					return withExit(exitInternal, err)
				}
			} else {
				for _, p := range res.Problems() {
					fmt.Fprintln(out, problemLine(dir, p))
				}
				fmt.Fprintln(out, summary(dir, res))
				if digest != "" {
					fmt.Fprintf(out, "definition %s\n", digest)
				}
			}
			if !res.Valid() {
				return withExit(exitUsage, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// validateAgentDir runs every configuration check on the agent folder dir:
// load, defaults, JSON Schema and cross-references (agentdir.Check). Checks
// that need other layers (prompt files, retry prompts, schema refs) are
// added here, so `capstan validate` and `capstan run` agree. Like `run`, it
// reads the folder once into a definition snapshot and checks that; the
// snapshot's digest is returned ("" when the folder cannot be read), the
// same digest a run of this folder records.
func validateAgentDir(dir string) (agentdir.ValidationResult, string, error) {
	snap, def, reg, err := agentdir.TakeConfigSnapshot(dir, agentdir.SnapshotOptions{})
	if err != nil {
		p := agentdir.ProblemFromError(err)
		if p.Code == agenterr.CodeConfigurationNotFound && p.File == agentdir.AgentFile && holdsSkills(dir) {
			p.Hint = "this folder holds Agent Skills, not an agent: list them with: capstan skills list " + shellQuote(dir)
		}
		return agentdir.NewValidationResult(p), "", nil
	}
	return agentdir.CheckLoaded(snap, dir, def, reg, agent.ValidateOptions()), snap.Digest(), nil
}

// validateJSON is what `capstan validate --json` prints: the validation
// result ({"valid", "errors", "warnings"}, as agentdir.ValidationResult
// renders it) and the definition digest.
type validateJSON struct {
	Valid            bool               `json:"valid"`
	Errors           []agentdir.Problem `json:"errors"`
	Warnings         []agentdir.Problem `json:"warnings"`
	DefinitionDigest string             `json:"definitionDigest,omitempty"`
}

func summary(dir string, res agentdir.ValidationResult) string {
	e, w := len(res.Errors()), len(res.Warnings())
	if res.Valid() {
		return fmt.Sprintf("%s: valid (%s)", dir, plural(w, "warning"))
	}
	return fmt.Sprintf("%s: invalid (%s, %s)", dir, plural(e, "error"), plural(w, "warning"))
}

// problemLine is p as one line, its file named from the current directory
// (dir is the agent folder its file is relative to; "" leaves it as is).
func problemLine(dir string, p agentdir.Problem) string {
	if p.File != "" && dir != "" {
		p.File = filepath.Join(dir, p.File)
	}
	return p.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// holdsSkills reports whether dir is a skill (it holds SKILL.md) or a
// folder of skills (a folder in it does), looking no deeper.
func holdsSkills(dir string) bool {
	for _, pattern := range []string{"SKILL.md", "*/SKILL.md"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pattern)); len(m) > 0 {
			return true
		}
	}
	return false
}
