package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/modelspec"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/skill"
)

// newSkillsCmd is "capstan skills": list and run Agent Skills.
func newSkillsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "skills",
		Short: "List Agent Skills in a folder, or run one with the SkillRuntime",
	}
	c.AddCommand(newSkillsListCmd(), newSkillsRunCmd())
	return c
}

func newSkillsListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list DIR",
		Short: "List the skills (folders with a SKILL.md) under DIR, with warnings for format quirks",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				e := agenterr.New(agenterr.CodeConfigurationNotFound, agenterr.LayerSkill, false, "skills list: %s is not a directory", dir)
				e.Hint = "pass the folder that holds the skills (folders with a SKILL.md), e.g.: capstan skills list ."
				return withExit(exitUsage, e)
			}
			skills, warns := skill.Discover(dir)
			if asJSON {
				if skills == nil {
					skills = []skill.Skill{}
				}
				if warns == nil {
					warns = []skill.Warning{}
				}
				return withExit(exitOK, writeJSON(cmd.OutOrStdout(), map[string]any{"skills": skills, "warnings": warns}))
			}
			printSkillList(cmd.OutOrStdout(), skills, warns)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print {skills, warnings} as JSON")
	return c
}

func printSkillList(w io.Writer, skills []skill.Skill, warns []skill.Warning) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTOKENS\tDESCRIPTION")
	for _, s := range skills {
		desc := strings.Join(strings.Fields(s.Description), " ")
		if r := []rune(desc); len(r) > 70 {
			desc = string(r[:69]) + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.ID, s.Name, s.BodyTokens, desc)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d skill(s)", len(skills))
	if len(warns) > 0 {
		fmt.Fprintf(w, ", %d warning(s):\n", len(warns))
		for _, wn := range warns {
			prefix := "  warning "
			if wn.Skipped {
				prefix = "  skipped "
			}
			fmt.Fprintln(w, prefix+wn.String())
		}
		return
	}
	fmt.Fprintln(w)
}

type skillsRunFlags struct {
	skillID, goal, model, baseURL, build, workDir string
	inputs, expects, constraints                  []string
	asJSON, fresh, allowUnsandboxed               bool
	allowKeyInAncestors                           bool
	seed                                          int64
	budgets                                       skill.Budgets
	stream                                        streamFlag
}

func newSkillsRunCmd() *cobra.Command {
	var f skillsRunFlags
	c := &cobra.Command{
		Use:   "run DIR --skill ID --goal TEXT [--input k=v ...] [--expect PATH[:SCHEMA] ...] [--model M]",
		Short: "Run one skill until its expected outputs exist and validate",
		Long: `Run the skill ID found under DIR: the model chooses the actions (read SKILL.md,
read references, expand templates, run scripts in the sandbox, write artifacts
under <workdir>/build/ unless --build says otherwise), the runtime enforces
budgets and validates. The skill's own folder is only read.

--input k=v     an input; v is parsed as JSON when it is JSON, else a string
--expect P[:S]  an expected output build/P, validated against the JSON Schema
                file S of the skill when given (repeatable)
--stream        show the model's text and each tool call live on stderr

Exit codes: 0 every expected output exists and validates; 1 the run ended
without that (budget, stall, violation, invalid output); 2 usage or skill
errors, or the model's API key not set; 3 model/provider or internal errors.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSkill(cmd.Context(), cmd, args[0], f)
		},
	}
	fs := c.Flags()
	fs.StringVar(&f.skillID, "skill", "", "skill id (folder path under DIR) or name")
	fs.StringVar(&f.goal, "goal", "", "what the run must achieve")
	fs.StringArrayVar(&f.inputs, "input", nil, "input as key=value (repeatable)")
	fs.StringArrayVar(&f.expects, "expect", nil, "expected output PATH[:SCHEMA] under build/ (repeatable)")
	fs.StringArrayVar(&f.constraints, "constraint", nil, "a constraint for the run (repeatable)")
	fs.StringVar(&f.model, "model", os.Getenv("CAPSTAN_MODEL"), "model as provider:model (script:<file> is relative to DIR)")
	fs.StringVar(&f.baseURL, "base-url", "", "API base URL for the provider")
	fs.StringVar(&f.build, "build", "", "build directory the skill writes its artifacts to (default <workdir>/build, never the skill's own folder)")
	fs.StringVar(&f.workDir, "workdir", ".", "the work dir the skill acts in: artifacts go to <workdir>/build (its run journal goes to the state directory, see docs/journal.md)")
	fs.BoolVar(&f.asJSON, "json", false, "print the ActResult as JSON on stdout")
	f.stream.register(fs, "")
	fs.BoolVar(&f.fresh, "fresh", false, "ignore the record of an identical earlier run")
	fs.BoolVar(&f.allowUnsandboxed, "allow-unsandboxed", false, "run scripts without namespaces when the machine cannot create them")
	fs.BoolVar(&f.allowKeyInAncestors, allowKeyInAncestorsFlag, false, "with --allow-unsandboxed on a machine that cannot sandbox: start although a process that started capstan holds a provider key, which the scripts can read (see docs/sandbox.md)")
	fs.Int64Var(&f.seed, "seed", 0, "sampling seed to record (temperature is 0)")
	fs.IntVar(&f.budgets.MaxToolCalls, "max-tool-calls", skill.DefaultBudgets().MaxToolCalls, "tool-call budget")
	fs.Int64Var(&f.budgets.TimeBudgetMs, "time-budget-ms", skill.DefaultBudgets().TimeBudgetMs, "time budget in milliseconds")
	fs.Int64Var(&f.budgets.TokenBudget, "token-budget", skill.DefaultBudgets().TokenBudget, "token budget")
	fs.IntVar(&f.budgets.ScriptTimeoutS, "script-timeout", skill.DefaultBudgets().ScriptTimeoutS, "seconds per script")
	fs.IntVar(&f.budgets.DiskWriteLimitMB, "disk-limit-mb", skill.DefaultBudgets().DiskWriteLimitMB, "disk write budget in MB")
	return c
}

// parseInputs turns k=v flags into an inputs map.
func parseInputs(kvs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--input %q: want key=value", kv)
		}
		var parsed any
		if json.Unmarshal([]byte(v), &parsed) == nil {
			out[k] = parsed
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// parseExpects turns PATH[:SCHEMA] flags into expected outputs.
func parseExpects(list []string) ([]skill.Expected, error) {
	var out []skill.Expected
	for _, e := range list {
		p, schema, _ := strings.Cut(e, ":")
		p = strings.TrimPrefix(strings.TrimSpace(p), "build/")
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(filepath.Clean(p), "..") {
			return nil, fmt.Errorf("--expect %q: want a path under build/, e.g. report.json:schemas/report.schema.json", e)
		}
		out = append(out, skill.Expected{Path: p, Schema: strings.TrimSpace(schema)})
	}
	return out, nil
}

// checkExpectSchemas refuses, before the model runs, an --expect whose
// SCHEMA is not a file of the skill: every run would end unverified after
// spending the model's budget.
func checkExpectSchemas(sk *skill.Skill, expects []skill.Expected) error {
	for _, e := range expects {
		if e.Schema == "" {
			continue
		}
		p, err := sandbox.ResolveInside(sk.Root, e.Schema)
		if err != nil {
			return fmt.Errorf("--expect %s:%s: the schema must be a file inside the skill %s: %w", e.Path, e.Schema, sk.ID, err)
		}
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			var found []string
			_ = filepath.WalkDir(sk.Root, func(q string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".json") {
					if rel, err := filepath.Rel(sk.Root, q); err == nil {
						found = append(found, filepath.ToSlash(rel))
					}
				}
				return nil
			})
			hint := "the skill has no .json file"
			if len(found) > 0 {
				hint = "the skill's .json files: " + strings.Join(found, ", ")
			}
			return fmt.Errorf("--expect %s:%s: the skill %s has no file %s; hint: SCHEMA is relative to the skill's folder; %s", e.Path, e.Schema, sk.ID, e.Schema, hint)
		}
	}
	return nil
}

func runSkill(ctx context.Context, cmd *cobra.Command, dir string, f skillsRunFlags) error {
	stderr := cmd.ErrOrStderr()
	if err := skillModel(stderr, &f); err != nil {
		return err
	}
	inputs, expects, err := skillRequest(f)
	if err != nil {
		return err
	}
	sk, err := findSkill(stderr, dir, f.skillID)
	if err != nil {
		return err
	}
	if err := checkExpectSchemas(sk, expects); err != nil {
		return withExit(exitUsage, fmt.Errorf("skills run: %w", err))
	}
	if f.build == "" {
		// Artifacts belong to the work, not to the skill's source folder.
		f.build = filepath.Join(f.workDir, "build")
	}
	absDir, _ := filepath.Abs(dir)
	provider, modelName := modelspec.Parse(f.model)
	model, err := llm.OpenModel(ctx, f.model, llm.Config{Provider: provider, Model: modelName, AgentDir: absDir, BaseURL: f.baseURL})
	if err != nil {
		return withExit(exitCodeFor(err, true), fmt.Errorf("skills run: %w", err))
	}
	sb, err := skillSandbox(ctx, stderr, f)
	if err != nil {
		return err
	}
	store, err := runStore()
	if err != nil {
		return err
	}
	runID := journal.NewRunID(time.Now())
	jw, err := store.Create(f.workDir, runID)
	if err != nil {
		return withExit(exitInternal, fmt.Errorf("skills run: journal: %w", err))
	}
	defer jw.Close()
	var progress *progressPrinter
	if f.stream.enabled(stderr, false) {
		// Only the stream: a skill run has no iterations to report.
		progress = newProgressPrinter(stderr)
		progress.progress = false
		ctx = progress.streamTo(ctx)
	}
	ctx, tr := startTracing(ctx, stderr)
	defer tr.stop(ctx)
	events := tr.emitter(ctx, event.Journal{Writer: jw})
	absWork, _ := filepath.Abs(f.workDir)
	// run.start / run.end in the agent's shapes, so `capstan runs` and
	// `capstan show` list skill runs too.
	events.Emit(agent.RunStartEvent{Format: journal.Format, RunID: runID, Agent: "skill:" + sk.ID, AgentDir: absDir, WorkDir: absWork, Model: f.model})
	started := time.Now()
	// The request carries the provider's own model name ("gpt-4o"), never
	// the "provider:model" spec the user typed.
	rt := skill.New(skill.Config{Model: model, ModelName: modelName, Sandbox: sb, Events: events, Seed: f.seed})
	res, runErr := rt.Run(ctx, sk, skill.Input{
		Goal: f.goal, Constraints: f.constraints, Inputs: inputs, Budgets: f.budgets,
		Expected: expects, BuildDir: f.build, Fresh: f.fresh,
	})
	if progress != nil {
		progress.end()
	}
	if res == nil {
		return withExit(exitCodeFor(runErr, false), fmt.Errorf("skills run: %w", runErr))
	}
	end := skillRunResult(res, len(expects) > 0, runID, "skill:"+sk.ID, f.model, time.Since(started), jw.Path())
	events.Emit(&end)
	printActSummary(stderr, res, len(expects) > 0, runID, jw.Path())
	if f.asJSON {
		if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
			return withExit(exitInternal, err)
		}
	}
	return skillExit(stderr, res, len(expects) > 0, runErr)
}

// skillModel settles the model of `skills run` and its base URL from the
// flags and the user config (default_model, base_urls).
func skillModel(stderr io.Writer, f *skillsRunFlags) error {
	uc, err := loadUserConfig()
	if err != nil {
		return withExit(exitUsage, err)
	}
	printUserConfigWarnings(stderr, uc)
	if f.model == "" {
		if err := uc.need("default_model"); err != nil {
			return withExit(exitUsage, err)
		}
		f.model = uc.DefaultModel
	}
	if f.baseURL == "" {
		if f.baseURL, err = uc.baseURLFor(f.model); err != nil {
			return withExit(exitUsage, err)
		}
	} else if err := llm.CheckBaseURL("--base-url", f.baseURL); err != nil {
		// The same rule as for runs: a key goes in the environment.
		return withExit(exitUsage, err)
	}
	return nil
}

// skillRequest checks the flags `skills run` requires and parses its
// inputs and expected outputs.
func skillRequest(f skillsRunFlags) (map[string]any, []skill.Expected, error) {
	switch {
	case f.skillID == "":
		return nil, nil, withExit(exitUsage, errors.New("skills run: --skill is required"))
	case strings.TrimSpace(f.goal) == "":
		return nil, nil, withExit(exitUsage, errors.New("skills run: --goal is required"))
	case f.model == "":
		return nil, nil, withExit(exitUsage, errors.New("skills run: --model is required (e.g. script:run.yaml, anthropic:claude-sonnet-4-5); or set CAPSTAN_MODEL, or default_model in the user config"))
	}
	inputs, err := parseInputs(f.inputs)
	if err != nil {
		return nil, nil, withExit(exitUsage, fmt.Errorf("skills run: %w", err))
	}
	expects, err := parseExpects(f.expects)
	if err != nil {
		return nil, nil, withExit(exitUsage, fmt.Errorf("skills run: %w", err))
	}
	return inputs, expects, nil
}

// findSkill finds skill id under dir, printing the warnings about it; a
// skill that was skipped says why in the error.
func findSkill(stderr io.Writer, dir, id string) (*skill.Skill, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, withExit(exitUsage, fmt.Errorf("skills run: %s is not a directory", dir))
	}
	skills, warns := skill.Discover(dir)
	sk, err := skill.Find(skills, id)
	if err != nil {
		for _, w := range warns {
			if w.SkillID == id && w.Skipped {
				err = fmt.Errorf("%w (%s)", err, w.String())
			}
		}
		return nil, withExit(exitUsage, fmt.Errorf("skills run: %w", err))
	}
	for _, w := range warns {
		if w.SkillID == sk.ID {
			fmt.Fprintln(stderr, "warning:", w.String())
		}
	}
	return sk, nil
}

// skillSandbox is the sandbox the skill's scripts run in. Where it is
// unavailable the scripts cannot run (a warning says so), and with
// --allow-unsandboxed they would run without namespaces: then no API key
// may be in the environment of the processes that started capstan.
func skillSandbox(ctx context.Context, stderr io.Writer, f skillsRunFlags) (*sandbox.Runner, error) {
	sb := sandbox.New(ctx, sandbox.Config{AllowUnsandboxed: f.allowUnsandboxed})
	if err := sb.Capabilities().Unavailable(); err != nil {
		if f.allowUnsandboxed && !f.allowKeyInAncestors {
			// The scripts run without namespaces: they see the processes
			// that started capstan, and their environment blocks.
			if err := checkAncestorKeys(os.Args, os.Getenv, "run the scripts in the sandbox (drop --allow-unsandboxed on a machine that can sandbox: see capstan doctor)"); err != nil {
				return nil, withExit(exitUsage, err)
			}
		}
		fmt.Fprintln(stderr, "warning: scripts cannot run:", err)
	}
	return sb, nil
}

// skillRunResult is a skill run's run.end, in the agent's Result shape: a
// success only when expected outputs were given and all exist and
// validate.
func skillRunResult(res *skill.ActResult, verified bool, runID, agentName, model string, took time.Duration, journalPath string) event.RunResult {
	end := event.RunResult{
		Success: res.Completed && verified, CompletionReason: res.ExitReason, Iterations: res.Metrics.ModelTurns,
		RunID: runID, Agent: agentName, Model: model, DurationMs: took.Milliseconds(), Journal: journalPath,
		Usage: event.Usage{InputTokens: res.Metrics.InputTokens, OutputTokens: res.Metrics.OutputTokens},
	}
	if !end.Success {
		end.Reason = "expected outputs not all produced and valid"
		if !verified {
			end.Reason = "no expected outputs to verify"
		}
	}
	if res.Error != nil {
		end.Error = &event.ResultError{Code: res.Error.Code, Message: res.Error.Message, Recoverable: res.Error.Recoverable}
	}
	return end
}

// skillExit is the exit of `skills run`: 0 when the expected outputs were
// verified, else not completed (or internal, for a run that failed).
func skillExit(stderr io.Writer, res *skill.ActResult, verified bool, runErr error) error {
	switch {
	case res.Completed && verified:
		return nil
	case runErr != nil:
		return withExit(exitInternal, nil)
	case res.Completed:
		// Without expected outputs nothing was verified.
		fmt.Fprintln(stderr, "note: no --expect given, so completion was declared, not verified")
		return withExit(exitNotCompleted, nil)
	}
	return withExit(exitNotCompleted, nil)
}

// printActSummary prints a skill run's outcome; verified says whether
// expected outputs were checked, without which a completed run is only
// declared complete.
func printActSummary(w io.Writer, r *skill.ActResult, verified bool, runID, journalPath string) {
	status := "NOT COMPLETED"
	switch {
	case r.Completed && verified:
		status = "COMPLETED"
	case r.Completed:
		status = "NOT VERIFIED"
	}
	m := r.Metrics
	fmt.Fprintf(w, "%s  skill %s — %s\n", status, r.Skill, r.ExitReason)
	fmt.Fprintf(w, "  tokens %d (in %d, out %d)  tool calls %d  turns %d  %.1fs\n", m.Tokens, m.InputTokens, m.OutputTokens, m.ToolCalls, m.ModelTurns, float64(m.TimeMs)/1000)
	fmt.Fprintf(w, "  disclosure L1 %d  L2 %d  L3 %d tokens (%d files, %d cache hits)  scripts %d run, %d reused\n",
		m.Disclosure.L1Tokens, m.Disclosure.L2Tokens, m.Disclosure.L3Tokens, m.Disclosure.L3Files, m.Disclosure.CacheHits, m.ScriptRuns, m.ScriptReuses)
	for _, a := range r.Artifacts {
		fmt.Fprintf(w, "  artifact %s  build/%s  %d bytes\n", a.Handle, a.Path, a.Bytes)
	}
	for _, o := range r.Validation.Outputs {
		mark := "ok"
		if !o.OK() {
			mark = "FAIL " + strings.Join(o.Errors, "; ")
		}
		fmt.Fprintf(w, "  expect build/%s: %s\n", o.Path, mark)
	}
	for _, u := range r.Unmet {
		fmt.Fprintf(w, "  unmet %s %s: %s → %s\n", u.Kind, u.Path, u.Reason, u.Proposal)
	}
	if r.Error != nil {
		fmt.Fprintf(w, "  error %s: %s\n", r.Error.Code, r.Error.Message)
	}
	fmt.Fprintf(w, "  journal %s  (capstan show %s)\n", journalPath, runID)
}
