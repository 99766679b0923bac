// The step machine moves an agent through the steps of
// steps_registry.json: the step checks (keyword, action, prompt) that
// decide each transition, retry policies, sub-steps, gateways and
// escalation. It performs no I/O of its own except through its interfaces
// (Judge, Notifier) and the journal.

package verdict

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
)

// Check types of a step's check.type.
const (
	CheckKeyword = "keyword"
	CheckAction  = "action"
	CheckPrompt  = "prompt"
)

// CheckInput is what a step check may look at.
type CheckInput struct {
	// Responses are the assistant texts of the iteration. Keyword checks
	// read only these (not tool output).
	Responses []string
	// ActionResults are the outcomes of the iteration's actions (tool
	// calls). Action checks read only these.
	ActionResults []event.ActionResult
	// Structured is the iteration's structured output; a step's
	// structuredGate reads its intent only from it.
	Structured json.RawMessage
}

// InputFromSummary builds a CheckInput from an iteration summary. When the
// summary has no ActionResults, the tool uses stand in for them (a tool
// that ran without error or denial is a successful action).
func InputFromSummary(s *event.IterationSummary) CheckInput {
	if s == nil {
		return CheckInput{}
	}
	in := CheckInput{Responses: s.AssistantResponses, ActionResults: s.ActionResults, Structured: s.StructuredOutput}
	if len(in.ActionResults) == 0 {
		for _, t := range s.ToolsUsed {
			in.ActionResults = append(in.ActionResults, event.ActionResult{
				Action: t.Name, Success: !t.IsError && !t.Denied, Output: t.Output})
		}
	}
	return in
}

// CheckResult is the outcome of one step check: whether it passed, and why.
type CheckResult struct {
	Type   string `json:"type"`
	Passed bool   `json:"passed"`
	Reason string `json:"reason,omitempty"`
}

// Judge decides a prompt-type check: does response satisfy the criterion
// in prompt?
type Judge interface {
	Judge(ctx context.Context, prompt, response string) (pass bool, reason string, err error)
}

// CheckerConfig configures a Checker.
type CheckerConfig struct {
	// Judge decides prompt checks; required only when a step uses one.
	Judge Judge
	// ResolvePrompt turns a prompt check's "prompt" (a C3L-relative path or
	// inline text) into the judging criterion; nil uses it as inline text.
	ResolvePrompt func(ctx context.Context, ref string) (string, error)
}

// Checker runs a step's check (keyword, action or prompt) to decide which
// of its moves the step takes.
type Checker struct {
	cfg CheckerConfig
}

// NewChecker returns a Checker.
func NewChecker(cfg CheckerConfig) *Checker { return &Checker{cfg: cfg} }

// Check evaluates check against in. Each type reads only its own input:
// keyword the response text, action the action results, prompt
// the response text through the Judge (a model call).
func (c *Checker) Check(ctx context.Context, check *agentdir.StepCheck, in CheckInput) (CheckResult, error) {
	if check == nil {
		return CheckResult{}, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerStep, false, "step has no check")
	}
	r := CheckResult{Type: check.Type}
	switch check.Type {
	case CheckKeyword:
		if len(check.Keywords) == 0 {
			return r, configErr("check/keywords", "list the keywords that pass the check", "keyword check has no keywords")
		}
		for _, kw := range check.Keywords {
			if kw != "" && containsAny(in.Responses, kw) {
				r.Passed, r.Reason = true, fmt.Sprintf("keyword %q found in the response", kw)
				return r, nil
			}
		}
		r.Reason = fmt.Sprintf("none of the keywords %q in the response", check.Keywords)
		return r, nil
	case CheckAction:
		if len(check.Actions) == 0 {
			return r, configErr("check/actions", "list the tools that must run without error", "action check has no actions")
		}
		for _, name := range check.Actions {
			last, ran := -1, false
			for i, a := range in.ActionResults {
				if a.Action == name {
					last, ran = i, true
				}
			}
			if !ran {
				r.Reason = fmt.Sprintf("action %s did not run", name)
				return r, nil
			}
			if !in.ActionResults[last].Success {
				r.Reason = fmt.Sprintf("action %s failed", name)
				return r, nil
			}
		}
		r.Passed, r.Reason = true, fmt.Sprintf("actions ran without error: %s", strings.Join(check.Actions, ", "))
		return r, nil
	case CheckPrompt:
		if strings.TrimSpace(check.Prompt) == "" {
			return r, configErr("check/prompt", "write the criterion the response must meet", "prompt check has no prompt")
		}
		if c.cfg.Judge == nil {
			return r, configErr("check", "build the checker with a Judge (a model) to use prompt checks",
				"prompt check needs a judge but none is configured")
		}
		criterion := check.Prompt
		if c.cfg.ResolvePrompt != nil {
			var err error
			if criterion, err = c.cfg.ResolvePrompt(ctx, check.Prompt); err != nil {
				return r, err
			}
		}
		pass, reason, err := c.cfg.Judge.Judge(ctx, criterion, strings.Join(in.Responses, "\n"))
		if err != nil {
			return r, err
		}
		r.Passed, r.Reason = pass, reason
		return r, nil
	default:
		return r, configErr("check/type", `use "keyword", "action" or "prompt"`, "unknown check type %q", check.Type)
	}
}

func containsAny(texts []string, kw string) bool {
	for _, t := range texts {
		if strings.Contains(t, kw) {
			return true
		}
	}
	return false
}

func configErr(ptr, hint, format string, args ...any) error {
	return &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerStep,
		Message: fmt.Sprintf(format, args...), File: agentdir.DefaultRegistryFile, Pointer: ptr, Hint: hint}
}

// verdictSchema is the structured output a BridgeJudge asks for.
var judgeVerdictSchema = json.RawMessage(`{"type":"object","properties":{"pass":{"type":"boolean"},"reason":{"type":"string"}},"required":["pass","reason"],"additionalProperties":false}`)

const judgeSystem = "You are a strict reviewer. You judge whether a response meets a criterion. " +
	"You do not use tools. You answer only with a JSON object {\"pass\": true|false, \"reason\": \"one sentence\"}."

// BridgeJudge is a Judge backed by a model: each judgement is a query in
// a fresh session asking for a JSON verdict {pass, reason}. When the
// provider returns prose instead of structured output, the verdict is
// recovered from the text.
type BridgeJudge struct {
	// Bridge runs the judging query. Use a bridge of its own or make sure
	// the loop keeps its session id from QueryResult (a judging query
	// changes Bridge.SessionID()).
	Bridge llm.Bridge
	// MaxTurns bounds the judging query (default 2).
	MaxTurns int
}

// Judge implements Judge. A verdict that cannot be read is a recoverable
// STEP_JUDGE error. The judging query is not shown in a live view
// (llm.StreamSink): its verdict is not the agent's answer.
func (j *BridgeJudge) Judge(ctx context.Context, prompt, response string) (bool, string, error) {
	ctx = llm.WithoutStreamSink(ctx)
	turns := j.MaxTurns
	if turns <= 0 {
		turns = 2
	}
	q := "## Criterion\n\n" + prompt + "\n\n## Response to judge\n\n" + response +
		"\n\nDoes the response meet the criterion? Answer with JSON: {\"pass\": true|false, \"reason\": \"...\"}"
	res, err := j.Bridge.Query(ctx, q, llm.QueryOptions{SystemPrompt: judgeSystem, PermissionMode: "plan",
		OutputSchema: judgeVerdictSchema, OutputName: "verdict", MaxTurns: turns})
	if err != nil {
		return false, "", agenterr.Wrap(err, agenterr.CodeStepJudge, agenterr.LayerStep, agenterr.IsRecoverable(err), "prompt check: judging query failed")
	}
	if v, ok := readJudgeVerdict(res.StructuredOutput); ok {
		return v.Pass, v.Reason, nil
	}
	for i := len(res.Responses) - 1; i >= 0; i-- {
		if v, ok := findJudgeVerdict(res.Responses[i]); ok {
			return v.Pass, v.Reason, nil
		}
	}
	return false, "", agenterr.New(agenterr.CodeStepJudge, agenterr.LayerStep, true,
		"prompt check: the judge gave no {\"pass\": bool, \"reason\": string} verdict: %q", clipCriterion(strings.Join(res.Responses, "\n"), 200))
}

type judgeVerdict struct {
	Pass   *bool  `json:"pass"`
	Reason string `json:"reason"`
}

type plainJudgeVerdict struct {
	Pass   bool
	Reason string
}

func readJudgeVerdict(raw json.RawMessage) (plainJudgeVerdict, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return plainJudgeVerdict{}, false
	}
	var v judgeVerdict
	if json.Unmarshal(raw, &v) != nil || v.Pass == nil {
		return plainJudgeVerdict{}, false
	}
	return plainJudgeVerdict{*v.Pass, v.Reason}, true
}

// findVerdict recovers the first JSON object with a boolean "pass" from
// prose (bare, inside a code fence, or surrounded by text).
func findJudgeVerdict(text string) (plainJudgeVerdict, bool) {
	tries := 0
	for i := 0; i < len(text) && tries < 256; i++ {
		if text[i] != '{' {
			continue
		}
		tries++
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			continue
		}
		if v, ok := readJudgeVerdict(raw); ok {
			return v, true
		}
	}
	return plainJudgeVerdict{}, false
}

func clipCriterion(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
