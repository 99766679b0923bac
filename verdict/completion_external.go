package verdict

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
)

// ExternalState completes when a GitHub issue or pull request is in the
// wanted state (agent.json completion type "externalState"), asking the
// gh CLI: gh issue view N --json state [--repo R].
type ExternalState struct {
	// Resource is "issue" (default) or "pr".
	Resource string
	// Number is the issue or pull request number (> 0).
	Number int
	// Repo is OWNER/REPO; "" lets gh use the work dir's repository.
	Repo string
	// State is the wanted state, case-insensitive (default "CLOSED" for an
	// issue, "MERGED" for a pull request).
	State string
	// WorkDir is where gh runs.
	WorkDir string
	// GH is the gh executable (default "gh", looked up on PATH).
	GH string
	// Timeout bounds one gh call (default 30 s).
	Timeout time.Duration
	handlerState
	lastState string
}

// Check implements Handler. A failing gh call is a recoverable
// EXTERNAL_STATE error.
func (h *ExternalState) Check(ctx context.Context, c CompletionContext) (event.CompletionResult, error) {
	if err := checkContext(c, false); err != nil {
		return event.CompletionResult{}, err
	}
	resource, want := h.Resource, h.State
	if resource == "" {
		resource = "issue"
	}
	if resource != "issue" && resource != "pr" {
		return event.CompletionResult{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"externalState resource must be \"issue\" or \"pr\", got %q", resource)
	}
	if want == "" {
		want = "CLOSED"
		if resource == "pr" {
			want = "MERGED"
		}
	}
	if h.Number <= 0 {
		return event.CompletionResult{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"externalState needs a %s number > 0, got %d", resource, h.Number)
	}
	got, err := h.query(ctx, resource)
	if err != nil {
		return event.CompletionResult{}, err
	}
	h.lastState = got
	r := event.CompletionResult{}
	if strings.EqualFold(got, want) {
		r = event.CompletionResult{Complete: true, Reason: fmt.Sprintf("%s #%d is %s", resource, h.Number, got)}
	}
	return h.set(r), nil
}

// LastState is the state gh reported on the last Check.
func (h *ExternalState) LastState() string { return h.lastState }

func (h *ExternalState) query(ctx context.Context, resource string) (string, error) {
	gh := h.GH
	if gh == "" {
		gh = "gh"
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cli := &github.CLI{Path: gh, Dir: h.WorkDir, Repo: h.Repo, Timeout: timeout}
	call := cli.Run(ctx, resource, "view", strconv.Itoa(h.Number), "--json", "state")
	args := call.Args
	if err := call.Err; err != nil {
		return "", &agenterr.Error{Code: agenterr.CodeExternalState, Layer: agenterr.LayerCompletion, Recoverable: true,
			Message: fmt.Sprintf("%s %s failed: %s", gh, strings.Join(args, " "), strings.TrimSpace(string(call.Stderr))),
			Hint:    "install the GitHub CLI and run `gh auth login`, or check the issue number and repo",
			Err:     err}
	}
	var out struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(call.Stdout, &out); err != nil || out.State == "" {
		return "", &agenterr.Error{Code: agenterr.CodeExternalState, Layer: agenterr.LayerCompletion, Recoverable: true,
			Message: fmt.Sprintf("%s %s printed no state: %q", gh, strings.Join(args, " "), truncateState(string(call.Stdout), 200)),
			Err:     err}
	}
	return out.State, nil
}

func truncateState(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
