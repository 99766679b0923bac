package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/internal/lazyre"

	"github.com/capstan-dev/capstan/proc"
)

// issueNumber is what the issue parameter must look like before it
// reaches gh's command line (a value such as "--repo=x" must not become a
// flag).
var issueNumber = lazyre.New(`^[1-9][0-9]{0,9}$`)

// ghTimeout bounds one gh call.
const ghTimeout = 30 * time.Second

// boundaryRule is the tool-policy text (llm.QueryOptions.Boundary) of a
// step: why it may not run GitHub boundary commands. No step may, as in
// climpt: work and verification steps because closing belongs to the
// run's closure, and a closure step because the closure is applied after
// the run has completed verified — by capstan (runner.integrations.github)
// or by whatever runs the agent — so the model cannot pre-empt it (close an
// issue that is to stay open, merge before the verification).
func boundaryRule(st agentdir.Step, g *agentdir.GitHub) string {
	switch kind := st.Kind(); {
	case kind == agentdir.KindWork:
		// (Constants for the usual kinds: a query's options are built every iteration.)
		return "a " + agentdir.KindWork + " step may not change issues, pull requests or releases; that belongs to the run's closure"
	case kind == agentdir.KindVerification:
		return "a " + agentdir.KindVerification + " step may not change issues, pull requests or releases; that belongs to the run's closure"
	case kind != agentdir.KindClosure:
		return "a " + kind + " step may not change issues, pull requests or releases; that belongs to the run's closure"
	case g.On():
		return "capstan applies the closure action (runner.integrations.github) itself once the run has completed; " +
			"say what should happen in your answer's closure_action and issue.labels instead"
	}
	return "a closure step does not close, merge or release itself: that is applied once the run has completed verified " +
		"(runner.integrations.github with a defaultClosureAction, or a subprocess step); emit closing and say what should happen in your answer"
}

// closureRef is the prompt of step st: for a closure step of an agent
// whose GitHub integration is enabled with a defaultClosureAction other
// than close, the edition with that adaptation (f_default_label-only.md)
// when it exists. When it does not, the step's own prompt is used and a
// warning says so.
func (f *flow) closureRef(st agentdir.Step) agentdir.PromptRef {
	ref := agentdir.PromptRef{C2: st.C2, C3: st.C3, Edition: st.Edition, Adaptation: st.Adaptation, Fallback: st.Fallback}
	g := f.a.spec.Runner.Integrations.GitHub
	if st.Kind() != agentdir.KindClosure || !g.On() || g.DefaultClosureAction == "" || g.DefaultClosureAction == agentdir.ClosureClose {
		return ref
	}
	adapted := ref
	adapted.Adaptation, adapted.Fallback = g.DefaultClosureAction, ""
	if _, ok := f.a.prompts.Exists(adapted); ok {
		return adapted
	}
	f.warn([]string{fmt.Sprintf("step %s: no closure prompt for defaultClosureAction %s (f_%s_%s.md under %s/%s); using the step's own prompt",
		st.StepID, g.DefaultClosureAction, editionOf(st), g.DefaultClosureAction, st.C2, st.C3)})
	return ref
}

func editionOf(st agentdir.Step) string {
	if st.Edition == "" {
		return "default"
	}
	return st.Edition
}

// closureOutput is what a closing step's structured output may say about
// the issue.
type closureOutput struct {
	ClosureAction json.RawMessage `json:"closure_action"`
	Issue         struct {
		Labels struct {
			Add    []string `json:"add"`
			Remove []string `json:"remove"`
		} `json:"labels"`
	} `json:"issue"`
}

// applyGitHub applies runner.integrations.github to the run's issue after
// a verified completion, journals each gh call and returns what happened
// (nil when the integration is off). The closure action is the closing
// step's closure_action (only a closure step's output counts), else
// defaultClosureAction, else close for an agent whose completion follows
// the issue's state, else none. label-only and label-and-close apply
// labels.completion together with the output's issue.labels; close and
// label-and-close close the issue, after the labels and only when they
// were applied.
func (a *Agent) applyGitHub(ctx context.Context, last *event.IterationSummary) *event.GitHubOutcome {
	g := a.spec.Runner.Integrations.GitHub
	if !g.On() {
		return nil
	}
	out := &event.GitHubOutcome{Issue: strings.TrimPrefix(strings.TrimSpace(a.vars[agentdir.IssueParam]), "#")}
	switch {
	case out.Issue == "":
		out.Skipped = "the run has no issue parameter value"
		return a.noteGitHub(out)
	case !issueNumber().MatchString(out.Issue):
		out.Skipped = fmt.Sprintf("issue %q is not an issue number", out.Issue)
		return a.noteGitHub(out)
	}
	var so closureOutput
	fromClosure := false
	if last != nil {
		if st, ok := a.reg.Steps[last.StepID]; ok && st.Kind() == agentdir.KindClosure && len(last.StructuredOutput) > 0 {
			fromClosure = json.Unmarshal(last.StructuredOutput, &so) == nil
		}
	}
	if fromClosure && len(so.ClosureAction) > 0 {
		var action string
		if json.Unmarshal(so.ClosureAction, &action) == nil && slices.Contains(agentdir.ClosureActions(), action) {
			out.Action, out.ActionSource = action, "output"
		} else {
			a.warnings = append(a.warnings, "the closing step's closure_action "+string(so.ClosureAction)+" is not one of "+
				strings.Join(agentdir.ClosureActions(), ", ")+"; ignored")
		}
	}
	switch {
	case out.Action != "":
	case g.DefaultClosureAction != "":
		out.Action, out.ActionSource = g.DefaultClosureAction, "config"
	case a.spec.FollowsIssue():
		out.Action, out.ActionSource = agentdir.ClosureClose, "default"
	default:
		out.Skipped = "no closure action: neither the closing step's closure_action nor defaultClosureAction is set, and the completion does not follow the issue"
		return a.noteGitHub(out)
	}
	if out.Action != agentdir.ClosureClose {
		if c := g.Labels.Completion; c != nil {
			out.AddLabels, out.RemoveLabels = c.Add, c.Remove
		}
		if fromClosure {
			out.AddLabels = union(out.AddLabels, so.Issue.Labels.Add)
			out.RemoveLabels = union(out.RemoveLabels, so.Issue.Labels.Remove)
		}
	}
	out.OK = true
	if len(out.AddLabels) > 0 || len(out.RemoveLabels) > 0 {
		args := []string{"issue", "edit", out.Issue}
		if len(out.AddLabels) > 0 {
			args = append(args, "--add-label", strings.Join(out.AddLabels, ","))
		}
		if len(out.RemoveLabels) > 0 {
			args = append(args, "--remove-label", strings.Join(out.RemoveLabels, ","))
		}
		out.OK = a.gh(ctx, out, args)
	}
	if out.Action != agentdir.ClosureLabelOnly {
		if out.OK {
			out.OK = a.gh(ctx, out, []string{"issue", "close", out.Issue})
		} else {
			a.warnings = append(a.warnings, "GitHub: issue "+out.Issue+" was not closed because its labels could not be changed")
		}
	}
	if len(out.Calls) == 0 {
		out.OK = false
		out.Skipped = "closure action " + out.Action + " with no labels to change"
	}
	return a.noteGitHub(out)
}

// noteGitHub journals a skipped integration as a warning.
func (a *Agent) noteGitHub(out *event.GitHubOutcome) *event.GitHubOutcome {
	if out.Skipped != "" {
		a.warnings = append(a.warnings, "GitHub: nothing done to the issue: "+out.Skipped)
	}
	return out
}

// ghCLI is the gh capstan runs for this agent: the one pinned before the
// model ran, in the work dir, naming repo in every call.
func (a *Agent) ghCLI(repo string) *github.CLI {
	return &github.CLI{Path: a.ghPath, Dir: a.workDir, Repo: repo, Timeout: ghTimeout}
}

// gh runs one gh call in the work dir (its arguments name the pinned
// repository, so the work dir's remotes do not matter), journals it and records it in out;
// a failure becomes a warning of the result.
func (a *Agent) gh(ctx context.Context, out *event.GitHubOutcome, args []string) bool {
	call := a.ghCLI(a.ghRepo.Repo).Run(context.WithoutCancel(ctx), args...)
	ev := event.GitHubCallEvent{Args: call.Args, ExitCode: call.ExitCode, DurationMs: call.Duration.Milliseconds(),
		Output: proc.RedactSecrets(strings.TrimSpace(strings.TrimSpace(string(call.Stdout)) + "\n" + strings.TrimSpace(string(call.Stderr))))}
	if call.Err != nil {
		ev.Error = call.Err.Error()
		if call.TimedOut {
			ev.Error = fmt.Sprintf("gh did not answer within %s", ghTimeout)
		}
	}
	out.Calls = append(out.Calls, ev)
	a.emit.Emit(ev)
	if call.Err != nil {
		msg := ev.Error
		if ev.Output != "" {
			msg += ": " + ev.Output
		}
		a.warnings = append(a.warnings, "GitHub: gh "+strings.Join(call.Args, " ")+" failed ("+msg+
			"); install the GitHub CLI and run `gh auth login`, or fix the issue number")
		return false
	}
	return true
}

// union returns a followed by the members of b it lacks, without
// duplicates or empty names.
func union(a, b []string) []string {
	var out []string
	for _, s := range append(slices.Clone(a), b...) {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
