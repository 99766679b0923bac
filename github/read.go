package github

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/tool"
)

// ReadToolName is the name of the read-only GitHub tool an agent with
// runner.integrations.github enabled gets (when capstan runs the tool loop).
const ReadToolName = "github_read"

// githubReadInput is github_read's input.
type githubReadInput struct {
	Operation string `json:"operation" jsonschema:"one of: issue_view, issue_list, pr_view, pr_list, pr_diff, pr_checks"`
	Number    int    `json:"number,omitempty" jsonschema:"the issue or pull request number (issue_view, pr_view, pr_diff, pr_checks)"`
	State     string `json:"state,omitempty" jsonschema:"issue_list: open, closed or all; pr_list: open, closed, merged or all (default open)"`
	Label     string `json:"label,omitempty" jsonschema:"issue_list: only issues with this label"`
	Limit     int    `json:"limit,omitempty" jsonschema:"issue_list, pr_list: at most this many (1-100, default 30)"`
}

// githubReadOps are github_read's operations: the gh arguments of each, and
// whether it needs a number.
var githubReadOps = map[string]struct {
	args   []string
	number bool
	states []string
}{
	"issue_view": {[]string{"issue", "view", "", "--json", "number,title,body,labels,state,assignees,milestone,comments"}, true, nil},
	"issue_list": {[]string{"issue", "list", "--json", "number,title,labels,state"}, false, []string{"open", "closed", "all"}},
	"pr_view":    {[]string{"pr", "view", "", "--json", "number,title,body,labels,state,mergeable,reviewDecision,statusCheckRollup"}, true, nil},
	"pr_list":    {[]string{"pr", "list", "--json", "number,title,labels,state,headRefName"}, false, []string{"open", "closed", "merged", "all"}},
	"pr_diff":    {[]string{"pr", "diff", ""}, true, nil},
	"pr_checks":  {[]string{"pr", "checks", ""}, true, nil},
}

// githubReadArgs turns a github_read input into gh arguments; the model's
// values only ever become a number or a --flag=value pair.
func githubReadArgs(in githubReadInput) ([]string, error) {
	op, ok := githubReadOps[in.Operation]
	if !ok {
		return nil, fmt.Errorf("unknown operation %q; use one of issue_view, issue_list, pr_view, pr_list, pr_diff, pr_checks", in.Operation)
	}
	args := append([]string(nil), op.args...)
	if op.number {
		if in.Number <= 0 {
			return nil, fmt.Errorf("%s needs a number > 0", in.Operation)
		}
		args[2] = strconv.Itoa(in.Number)
	}
	if in.State != "" {
		if !slices.Contains(op.states, in.State) {
			return nil, fmt.Errorf("%s takes no state %q (states: %s)", in.Operation, in.State, strings.Join(op.states, ", "))
		}
		args = append(args, "--state="+in.State)
	}
	if in.Label != "" {
		if in.Operation != "issue_list" || strings.HasPrefix(in.Label, "-") || strings.ContainsAny(in.Label, "\x00\n\r") {
			return nil, fmt.Errorf("label %q: only issue_list filters by a label, which is a plain label name", in.Label)
		}
		args = append(args, "--label="+in.Label)
	}
	if in.Limit != 0 {
		if op.states == nil || in.Limit < 1 || in.Limit > 100 {
			return nil, fmt.Errorf("limit %d: issue_list and pr_list take a limit from 1 to 100", in.Limit)
		}
		args = append(args, "--limit="+strconv.Itoa(in.Limit))
	}
	return args, nil
}

// ReadTool is the read-only GitHub tool: it runs gh (capstan's own
// process, with its credentials; outside the sandbox, which has no
// network) for reading issues and pull requests of the repository gh
// names (gh.Repo, the run's pinned repository) only. Nothing it can be
// asked changes GitHub.
func ReadTool(gh *CLI) tool.Tool {
	return tool.Func(ReadToolName, "Read GitHub issues and pull requests of this repository (read only): "+
		"issue_view, issue_list, pr_view, pr_list, pr_diff, pr_checks. Changing issues is not possible; "+
		"the run's closure does that after the run completes.",
		func(ctx context.Context, in githubReadInput) (string, error) {
			args, err := githubReadArgs(in)
			if err != nil {
				return "", err
			}
			call := gh.Run(ctx, args...)
			if call.Err != nil {
				if call.TimedOut {
					return "", fmt.Errorf("gh did not answer within %s", call.Duration.Round(time.Second))
				}
				return "", fmt.Errorf("gh %s: %v: %s", strings.Join(call.Args, " "), call.Err, strings.TrimSpace(string(call.Stderr)))
			}
			if len(call.Stdout) == 0 {
				return "(no output)", nil
			}
			return string(call.Stdout), nil
		}).WithKind(tool.KindRead)
}
