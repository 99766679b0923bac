package testfix

// The prompts of the fix agent. LANG, CHECKS and TEST_COMMAND are
// replaced by Config before the prompts become templates ({uv-x} step
// variables, Handlebars {{param}} retry parameters).
const (
	systemPrompt = `You are a careful engineer working in LANG, in {uv-workdir}.
Make the smallest change that does the task. Never change the tests or
what configures them to make them pass: fix the code under test. Run the
checks yourself before you say you are done, and commit your change with
git. End every answer with the JSON object the step asks for.
`
	stepPrompt = `---
stepId: complete.fix
---
{uv-task}

The work is checked with CHECKS and ` + "`git status --porcelain`" + `: every
check must pass, every test that runs now must still run, and the work tree
must be clean (commit your change with git; do not commit build output or
caches).

When everything is done, answer with ` + "`status: \"completed\"`" + ` and
` + "`next_action.action: \"complete\"`" + `. capstan runs the checks itself
before it accepts that.
`
	testFailedRetry = `## The tests still fail

You said the work was complete, but ` + "`TEST_COMMAND`" + ` fails.

### Failing tests
{{#each failedTests}}
- ` + "`{{this.name}}`" + `: {{this.error}}
{{/each}}

### Test output
` + "```" + `
{{errorOutput}}
` + "```" + `

Fix the code so these tests pass, run the tests yourself, commit, and report again.
`
	checkFailedRetry = `## A check fails

You said the work was complete, but the check ` + "`{{validator}}`" + ` fails.

### Its output
` + "```" + `
{{errorOutput}}
` + "```" + `

Fix what it reports, run it yourself, commit, and report again.
`
	gitDirtyRetry = `## Uncommitted changes

The checks pass now, but the work tree is not clean.

{{#if changedFiles}}
Changed files:
{{#each changedFiles}}
- {{this}}
{{/each}}
{{/if}}
{{#if untrackedFiles}}
Untracked files:
{{#each untrackedFiles}}
- {{this}}
{{/each}}
{{/if}}

Commit the changes that belong to the fix with a message that says what you
fixed; remove what you created only to try things out. Then report again.
`
	protectedRetry = `## The tests were changed

You said the work was complete, but you changed files that decide whether
the work is done. They are read-only for this task:

{{#each protectedFiles}}
- {{this}}
{{/each}}

### What changed (` + "`-`" + ` is the original, ` + "`+`" + ` your change)
` + "```" + `
{{diff}}
` + "```" + `

{{restore}}

Put them back exactly, fix the code under test instead, commit, and report again.
`
	lostTestsRetry = `## Tests no longer run

You said the work was complete, but ` + "`{{testCommand}}`" + ` ran {{currentCount}}
tests where it ran {{baselineCount}} before you started.
{{#each disappearedTests}}
- gone: ` + "`{{this}}`" + `
{{/each}}
{{#each skippedTests}}
- skipped: ` + "`{{this}}`" + `
{{/each}}

{{restore}}

Every test that ran before must still run and pass. Undo what keeps them
from running, fix the code under test, commit, and report again.
`
	genericRetry = `## Completion check failed: {{pattern}}

Validator ` + "`{{validator}}`" + ` did not pass. Fix what it reports, commit, and report again.
`
	declarationSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$defs": {
    "nextAction": {
      "type": "object",
      "properties": {
        "action": { "enum": ["continue", "complete"] },
        "reason": { "type": "string" }
      },
      "required": ["action", "reason"]
    }
  },
  "complete.fix": {
    "type": "object",
    "properties": {
      "status": { "enum": ["in_progress", "completed"] },
      "summary": { "type": "string" },
      "next_action": { "$ref": "#/$defs/nextAction" }
    },
    "required": ["status", "summary", "next_action"]
  }
}
`
)
