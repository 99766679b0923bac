package agent

import (
	"context"
	"errors"
	"sort"
	"strconv"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/prompt"
)

// BuiltinVariables are the {uv-x} variables the runtime supplies in every
// iteration, in addition to the agent's parameters.
var BuiltinVariables = []string{"iteration", "max_iterations", "completion_keyword", "step_id", "agent_name", "workdir"}

// Problem codes contributed by the layers above configuration.
const (
	CodeStepPromptMissing  = "SR-STEP-PROMPT-MISSING"
	CodeStepPromptInvalid  = "SR-STEP-PROMPT-INVALID"
	CodeRetryPromptMissing = "SR-RETRY-PROMPT-MISSING"
)

// ValidateOptions are the configuration checks of a full validation: the
// providers, failure patterns, extractors and runtime variables this binary
// knows, plus the cross-layer checks (every step prompt resolves and
// parses, every declared failure pattern has a retry prompt). `capstan
// validate` and `capstan run` both use it, so they agree.
func ValidateOptions() config.ValidateOptions {
	return config.ValidateOptions{
		Providers:        llm.Providers(),
		BuiltinPatterns:  builtinPatternNames(),
		Extractors:       completion.Extractors(),
		BuiltinVariables: BuiltinVariables,
		Checks:           []func(string, *config.Definition, *config.Registry) []config.Problem{checkPrompts},
	}
}

// checkPrompts resolves every step prompt and every declared retry prompt.
func checkPrompts(dir string, def *config.Definition, reg *config.Registry) []config.Problem {
	if dir == "" || reg == nil {
		return nil
	}
	r := prompt.New(prompt.Config{AgentDir: dir, Base: def.Runner.Prompts.Base, C1: reg.C1,
		FallbackDir: def.Runner.Prompts.FallbackDir, SystemPath: def.Runner.SystemPromptPath})
	regFile := def.Runner.Prompts.Registry
	if regFile == "" {
		regFile = config.DefaultRegistryFile
	}
	var out []config.Problem
	ids := make([]string, 0, len(reg.Steps))
	for id := range reg.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ctx := context.Background()
	for _, id := range ids {
		st := reg.Steps[id]
		ptr := "/steps/" + escapePointer(id)
		if st.Type != "gateway" {
			ref := prompt.Ref{C2: st.C2, C3: st.C3, Edition: st.Edition, Adaptation: st.Adaptation, Fallback: st.Fallback}
			if _, err := r.Resolve(ctx, ref, nil); err != nil {
				code, hint := CodeStepPromptInvalid, "fix the prompt file"
				if errors.Is(err, agenterr.ErrPromptNotFound) {
					code, hint = CodeStepPromptMissing, "create the prompt file, or set the step's fallback"
				}
				out = append(out, config.Problem{Code: code, Severity: config.SeverityError, File: regFile,
					Pointer: ptr, Message: "step " + id + ": " + err.Error(), Hint: hint})
			}
		}
		for i, cond := range st.CompletionConditions {
			v, ok := reg.Validators[cond.Validator]
			if !ok {
				continue // reported by config
			}
			pat, declared := reg.CompletionPatterns[v.FailurePattern]
			if !declared {
				continue // built-in patterns fall back to the generic retry prompt
			}
			rt, err := r.ResolveRetry(ctx, reg.C1, st.C2, st.C3, pat.Edition, pat.Adaptation)
			if err == nil && rt.Found {
				continue
			}
			msg := "step " + id + ": no retry prompt for failure pattern " + v.FailurePattern
			if err != nil {
				msg += ": " + err.Error()
			} else {
				msg += " (tried " + joinNames(rt.Tried) + ")"
			}
			out = append(out, config.Problem{Code: CodeRetryPromptMissing, Severity: config.SeverityError, File: regFile,
				Pointer: ptr + "/completionConditions/" + itoa(i), Message: msg,
				Hint: "create the retry prompt file, or use a built-in pattern (" + joinNames(builtinPatternNames()) + ") whose generic prompt needs no file"})
		}
	}
	return out
}

func escapePointer(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}

func itoa(i int) string { return strconv.Itoa(i) }

func builtinPatternNames() []string {
	names := make([]string, 0, 6)
	for n := range completion.BuiltinPatterns() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
