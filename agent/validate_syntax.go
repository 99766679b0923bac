package agent

import (
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/llm/script"
	"github.com/capstan-dev/capstan/verdict"
)

// Codes of the syntax checks `capstan validate` runs on files that other
// layers parse only at run time.
const (
	CodeModelScriptInvalid = "AG-MODEL-SCRIPT-INVALID"
	CodeRetryPromptInvalid = "SR-RETRY-PROMPT-INVALID"
	// CodeRetryPromptUV: a retry prompt holds {uv-name} placeholders,
	// which only step prompts substitute.
	CodeRetryPromptUV = "SR-RETRY-PROMPT-UV"
)

// retryTemplateSyntax reports a retry template that cannot be rendered:
// the one place validate checks retry-template syntax.
func retryTemplateSyntax(text string) error {
	_, err := verdict.RenderRetryTemplate(text, nil)
	return err
}

// checkRetrySyntax parses every retry template a declared failure pattern
// can resolve to (for each step's c2/c3), so a Handlebars syntax error is
// reported by validate instead of when the validator first fails.
func checkRetrySyntax(dir string, def *agentdir.Definition, reg *agentdir.Registry) []agentdir.Problem {
	if (dir == "" && def.FS() == nil) || reg == nil || len(reg.CompletionPatterns) == 0 {
		return nil
	}
	r := newPromptResolver(dir, def, reg)
	ctx := context.Background()
	ids := make([]string, 0, len(reg.Steps))
	for id := range reg.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	names := make([]string, 0, len(reg.CompletionPatterns))
	for n := range reg.CompletionPatterns {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []agentdir.Problem
	seen := map[string]bool{}
	for _, name := range names {
		pat := reg.CompletionPatterns[name]
		for _, id := range ids {
			st := reg.Steps[id]
			rt, err := r.ResolveRetry(ctx, reg.C1, st.C2, st.C3, pat.Edition, pat.Adaptation)
			if err != nil || !rt.Found || seen[rt.Path] {
				continue // resolution problems are checkPrompts' to report
			}
			seen[rt.Path] = true
			if serr := retryTemplateSyntax(rt.Text); serr != nil {
				out = append(out, agentdir.Problem{Code: CodeRetryPromptInvalid, Severity: agentdir.SeverityError, File: registryFile(def),
					Pointer: agentdir.JoinPointer("completionPatterns", name),
					Message: "retry prompt " + agentRelative(dir, rt.Path) + " for failure pattern " + name + ": " + firstLine(serr.Error()),
					Hint:    "fix the Handlebars syntax ({{param}}, {{#each list}}…{{/each}}, {{#if x}}…{{else}}…{{/if}})"})
				continue
			}
			if p, ok := retryUVProblem(def, reg, name, agentRelative(dir, rt.Path), rt.Text); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// retryUVProblem warns of {uv-name} placeholders in the retry prompt text
// at path for failure pattern name: a retry prompt is a Handlebars template
// filled with the failure's params, so they would reach the model as
// written.
func retryUVProblem(def *agentdir.Definition, reg *agentdir.Registry, name, path, text string) (agentdir.Problem, bool) {
	vars := agentdir.TemplateVariables(text)
	if len(vars) == 0 {
		return agentdir.Problem{}, false
	}
	params := map[string]bool{"pattern": true, "validator": true, "description": true, "stepId": true}
	for _, p := range reg.CompletionPatterns[name].Params {
		params[p] = true
	}
	for _, v := range reg.Validators {
		if v.FailurePattern == name {
			for p := range v.ExtractParams {
				params[p] = true
			}
		}
	}
	placeholders := make([]string, len(vars))
	var write, absent []string
	for i, v := range vars {
		placeholders[i] = "{uv-" + v + "}"
		if params[v] {
			write = append(write, "{{"+v+"}}")
		} else {
			absent = append(absent, v)
		}
	}
	hint := "write the failure's params as {{name}} ({{pattern}}, {{validator}}, and each name the failing validator's extractParams gives)"
	if len(write) > 0 {
		hint = "write " + strings.Join(write, ", ") + " instead"
	}
	if len(absent) > 0 {
		hint += "; " + strings.Join(absent, ", ") + " is not a param of this failure: add it to the validator's extractParams, or write the text itself"
	}
	return agentdir.Problem{Code: CodeRetryPromptUV, Severity: agentdir.SeverityWarning, File: registryFile(def),
		Pointer: agentdir.JoinPointer("completionPatterns", name),
		Message: "retry prompt " + path + " for failure pattern " + name + " has " + strings.Join(placeholders, ", ") +
			", which is sent as written: retry prompts are Handlebars templates filled with the failure's params, and only step prompts substitute {uv-name}",
		Hint: hint}, true
}

// agentRelative is path relative to the agent folder dir when it lies in
// it, as the other problems name prompt files; else path unchanged.
func agentRelative(dir, path string) string {
	if dir == "" || !filepath.IsAbs(path) {
		return path
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(abs, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(rel)
	}
	return path
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// checkModelScripts parses every script: model file (runner.model and the
// steps' models) the way the script provider will, so a YAML or script
// error is reported by validate instead of at the first model call.
func checkModelScripts(dir string, def *agentdir.Definition, reg *agentdir.Registry) []agentdir.Problem {
	if def == nil || (dir == "" && def.FS() == nil) {
		return nil
	}
	fsys := def.FS() // the files the run reads the scripts from
	if fsys == nil {
		fsys = os.DirFS(dir)
	}
	type use struct{ file, pointer, spec string }
	uses := []use{{agentdir.AgentFile, "/runner/model", def.Runner.Model}}
	if reg != nil {
		ids := make([]string, 0, len(reg.Steps))
		for id := range reg.Steps {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			uses = append(uses, use{registryFile(def), agentdir.JoinPointer("steps", id, "model"), reg.Steps[id].Model})
		}
	}
	var out []agentdir.Problem
	seen := map[string]bool{}
	for _, u := range uses {
		provider, file, _ := strings.Cut(u.spec, ":")
		if provider != "script" {
			continue
		}
		if file == "" {
			file = "script.yaml"
		}
		p := path.Clean(file)
		if !fs.ValidPath(p) {
			continue // outside the agent folder: reported by config
		}
		if fi, err := fs.Stat(fsys, p); err != nil || !fi.Mode().IsRegular() || seen[p] {
			continue // a missing file is reported by config; one report per file
		}
		seen[p] = true
		if _, err := script.LoadFS(fsys, p, file); err != nil {
			var cause error = err
			if e := agenterr.From(err); e != nil && e.Line > 0 {
				cause = e
			}
			msg, hint := withOwnHint(cause, "fix the script file (see docs/script-provider.md)")
			out = append(out, agentdir.Problem{Code: CodeModelScriptInvalid, Severity: agentdir.SeverityError, File: u.file,
				Pointer: u.pointer, Message: "script " + file + ": " + msg, Hint: hint})
		}
	}
	return out
}
