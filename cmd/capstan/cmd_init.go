package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/schemas"
	"github.com/capstan-dev/capstan/verify"
)

// agentNameRE is agent.json's name rule (schemas/agent.schema.json).
var agentNameRE = lazyre.New(`^[a-z][a-z0-9-]{0,63}$`)

// newInitCmd builds `capstan init NAME [--dir D]`.
func newInitCmd() *cobra.Command {
	var parent string
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Create a working agent folder NAME",
		Long: `Create the agent folder D/NAME (D defaults to the current directory) with
agent.json, steps_registry.json, a system prompt, a C3L step prompt using the
{uv-topic} parameter, a retry prompt, and script.yaml: scripted model replies
that let the agent run offline with --model script:script.yaml.

An existing folder is never overwritten. The files are written to a temporary
folder first and renamed into place, so an interrupted init leaves nothing
half-written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := scaffoldAgent(parent, args[0])
			if err != nil {
				if agenterr.From(err) != nil {
					return withExit(exitUsage, err) // bad name, existing folder, missing --dir
				}
				return withExit(exitInternal, err) // the file system failed
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "created %s\n\n", target)
			fmt.Fprint(out, nextCommands(target, args[0]))
			return nil
		},
	}
	cmd.Flags().StringVar(&parent, "dir", ".", "folder in which to create the agent folder")
	return cmd
}

// nextCommands are the commands init suggests: validate the new agent,
// then run it offline in a fresh work dir next to it. They work as printed
// from the directory init ran in.
func nextCommands(target, name string) string {
	work := verify.ShellQuote(target + "-work")
	return fmt.Sprintf("next:\n  capstan validate %s\n  mkdir -p %s && capstan run %s --workdir %s\n",
		verify.ShellQuote(target), work, verify.ShellQuote(target), work)
}

// scaffoldAgent writes a new agent folder parent/name and returns its path.
func scaffoldAgent(parent, name string) (string, error) {
	if !agentNameRE().MatchString(name) {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"agent name %q is not allowed", name)
		e.Hint = "use lowercase letters, digits and dashes, starting with a letter (at most 64), e.g. \"issue-fixer\""
		return "", e
	}
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		e := agenterr.New(agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false,
			"--dir %q is not an existing folder", parent)
		e.Hint = "create it first: mkdir -p " + verify.ShellQuote(parent) + " && capstan init " + verify.ShellQuote(name) + " --dir " + verify.ShellQuote(parent)
		if err == nil {
			e.Message = fmt.Sprintf("--dir %q is a file, not a folder", parent)
			e.Hint = "create the agent here instead: capstan init " + verify.ShellQuote(name)
		}
		return "", e
	}
	target := filepath.Join(parent, name)
	if _, err := os.Lstat(target); err == nil {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"%s already exists; capstan init never overwrites", target)
		e.Hint = "choose another NAME or --dir, or remove the folder yourself"
		return "", e
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, "."+name+".init-*")
	if err != nil {
		return "", err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	for _, f := range scaffoldFiles(name) {
		p := filepath.Join(tmp, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	// Re-check right before the rename: rename(2) would replace an empty
	// folder created in the meantime.
	if _, err := os.Lstat(target); err == nil {
		return "", agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"%s appeared while scaffolding; nothing was written", target)
	}
	if err := os.Rename(tmp, target); err != nil {
		return "", err
	}
	done = true
	return target, nil
}

type scaffoldFile struct{ path, content string }

// scaffoldFiles returns the files of a new agent called name (already
// checked against agentNameRE, so it needs no JSON or YAML escaping): the
// templates below with {{name}} and the schemas' URLs filled in.
func scaffoldFiles(name string) []scaffoldFile {
	r := strings.NewReplacer("{{name}}", name, "{{agentSchema}}", schemas.AgentURL, "{{registrySchema}}", schemas.StepsRegistryURL)
	files := []scaffoldFile{
		{"agent.json", scaffoldAgentJSON},
		{"steps_registry.json", scaffoldRegistryJSON},
		{"prompts/system.md", scaffoldSystemPrompt},
		{"prompts/steps/initial/main/f_default.md", scaffoldStepPrompt},
		{"prompts/steps/initial/main/f_failed_file-missing.md", scaffoldRetryPrompt},
		{"script.yaml", scaffoldScript},
		{"README.md", scaffoldReadme},
	}
	for i := range files {
		files[i].content = r.Replace(files[i].content)
	}
	return files
}

// scaffoldAgentJSON is the new agent's agent.json (see scaffoldFiles).
const scaffoldAgentJSON = `{
  "$schema": "{{agentSchema}}",
  "version": "0.1.0",
  "name": "{{name}}",
  "displayName": "{{name}}",
  "description": "Writes hello.txt with a greeting about a topic; done only when the file really exists.",
  "parameters": {
    "topic": {
      "type": "string",
      "description": "What the greeting is about",
      "default": "capstan"
    }
  },
  "runner": {
    "model": "script:script.yaml",
    "systemPromptPath": "prompts/system.md",
    "prompts": {
      "registry": "steps_registry.json",
      "base": "prompts"
    },
    "completion": {
      "type": "keyword",
      "keyword": "TASK_COMPLETE",
      "validators": ["hello-exists"]
    },
    "boundaries": {
      "allowedTools": ["Read", "Write"],
      "permissionMode": "acceptEdits"
    },
    "budgets": {
      "maxIterations": 3
    },
    "verification": {
      "protect": ["**/*_test.go", "**/test_*.py", "**/*_test.py", "**/conftest.py", "**/*.test.js", "**/*.test.ts"]
    }
  }
}
`

// scaffoldRegistryJSON is its steps registry: one step, one file validator and its failure pattern (see scaffoldFiles).
const scaffoldRegistryJSON = `{
  "$schema": "{{registrySchema}}",
  "agentId": "{{name}}",
  "version": "0.1.0",
  "c1": "steps",
  "entryStep": "initial.main",
  "steps": {
    "initial.main": {
      "stepId": "initial.main",
      "name": "Write the greeting",
      "c2": "initial",
      "c3": "main",
      "edition": "default",
      "uvVariables": ["topic"],
      "onFailure": { "action": "retry", "maxAttempts": 3 }
    }
  },
  "completionPatterns": {
    "file-missing": {
      "description": "hello.txt was not written",
      "edition": "failed",
      "adaptation": "file-missing"
    }
  },
  "validators": {
    "hello-exists": {
      "type": "file",
      "path": "hello.txt",
      "failurePattern": "file-missing"
    }
  }
}
`

// scaffoldSystemPrompt is its system prompt (see scaffoldFiles).
const scaffoldSystemPrompt = `You are {{name}}, an agent run by capstan.
Work only inside the working directory. When the task is done, say TASK_COMPLETE;
capstan then checks the result before accepting it.
`

// scaffoldStepPrompt is the prompt of its one step (see scaffoldFiles).
const scaffoldStepPrompt = `Write a file named hello.txt in the working directory containing one line:
a short greeting about {uv-topic}.

When the file is written, reply with TASK_COMPLETE.
`

// scaffoldRetryPrompt is the retry prompt sent when hello.txt is missing after the model said it was done (see scaffoldFiles).
const scaffoldRetryPrompt = `You said the task was complete, but hello.txt does not exist in the working
directory. Write it now (one line: a greeting), then reply with TASK_COMPLETE.
`

// scaffoldScript is the scripted model replies that run it offline (see scaffoldFiles).
const scaffoldScript = `# Scripted model replies: run this agent offline, deterministically, with
#   capstan run <this folder> --workdir <dir>
# (runner.model is script:script.yaml). Turns are consumed in order, one per
# model call. Switch runner.model (or pass --model) to a real provider, e.g.
# anthropic:claude-sonnet-4-5, to let a model do the work.
turns:
  - text: "I'll write the greeting file."
    tool_calls:
      - name: Write
        input: {file_path: hello.txt, content: "Hello from {{name}}!\n"}
  - text: "hello.txt is written. TASK_COMPLETE"
`

// scaffoldReadme is its README: what each file is for and how to run it (see scaffoldFiles).
const scaffoldReadme = `# {{name}}

A capstan agent scaffolded by ` + "`capstan init {{name}}`" + `.

| File | Purpose |
|---|---|
| agent.json | name, the ` + "`topic`" + ` parameter (flag ` + "`--topic`" + `, prompt variable ` + "`{uv-topic}`" + `), model, completion, tool boundaries, budgets |
| steps_registry.json | the step ` + "`initial.main`" + `, the validator ` + "`hello-exists`" + ` and its failure pattern |
| prompts/system.md | system prompt |
| prompts/steps/initial/main/f_default.md | the step's prompt (C3L path steps/initial/main, edition default) |
| prompts/steps/initial/main/f_failed_file-missing.md | retry prompt sent when hello.txt is missing after the model said it was done |
| script.yaml | scripted replies of the ` + "`script`" + ` model, for offline runs |

Completion is verified, not declared: the run completes when the reply contains
TASK_COMPLETE *and* the ` + "`hello-exists`" + ` validator (listed in
runner.completion.validators) finds hello.txt. A reply that says TASK_COMPLETE
without writing the file gets the retry prompt f_failed_file-missing.md in the
same session; after the step's ` + "`onFailure.maxAttempts`" + ` (3) failed attempts the
run ends as ` + "`validation_exhausted`" + ` (exit 1). So does a scripted run whose
script has no reply left for a retry prompt.

Tests in the working directory are protected (` + "`runner.verification.protect`" + `):
the model may read them but not change, delete or add them, so it cannot make
a test validator pass by editing the tests. Adjust the globs to your project.

    capstan validate .
    mkdir -p ../{{name}}-work
    capstan run . --workdir ../{{name}}-work --topic "Go"
    capstan run . --model anthropic:claude-sonnet-4-5 --workdir ../{{name}}-work

The schemas referenced by ` + "`$schema`" + ` give editors autocomplete; field reference:
docs/configuration.md in the capstan repository.
`
