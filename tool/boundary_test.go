package tool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/tool/tooldecl"
)

func TestBoundaryCommand(t *testing.T) {
	blocked := map[string]string{
		"gh issue close 12":                                                      "gh issue close",
		"true && /usr/bin/gh  pr merge 7 --squash":                               "gh  pr merge",
		"gh issue edit 3 --add-label x --state closed":                           "gh issue edit 3 --add-label x --state closed",
		"gh api repos/o/r/issues/1 -X PATCH":                                     "gh api",
		"curl -X PATCH https://api.github.com/repos/o/r/issues/1":                "curl -X PATCH https://api.github.com",
		"python3 -c 'import urllib; urllib.urlopen(\"https://api.github.com\")'": "python3 -c 'import urllib; urllib.urlopen(\"https://api.github.com",
		`echo '{"state": "closed"}' | some-client`:                               `"state": "closed"`,
		"gh release create v1":                                                   "gh release create",
		"gh issue reopen 4":                                                      "gh issue reopen",
		"gh -R o/r issue close 1":                                                "gh -R o/r issue close",
		"gh issue --repo o/r close 1":                                            "gh issue --repo o/r close",
		"gh pr -R o/r merge 2":                                                   "gh pr -R o/r merge",
		"gh --hostname h api /x":                                                 "gh --hostname h api",
		`'gh' pr 'merge' 7`:                                                      "gh pr merge",
		`g\h issue "close" 1`:                                                    "gh issue close",
		`command "gh" api /repos`:                                                "gh api",
		`$'gh' release 'edit' v1`:                                                "gh release edit",
		"gh alias set m 'pr merge'":                                              "gh alias set",
		"gh alias import aliases.yml":                                            "gh alias import",
		// Workflows, reviews, runs, the repository, gh itself.
		"gh workflow run deploy.yml":    "gh workflow run",
		"gh workflow -R o/r disable ci": "gh workflow -R o/r disable",
		"gh pr review 3 --approve":      "gh pr review 3 --approve",
		"gh pr review 3 -a":             "gh pr review 3 -a",
		"gh pr review 3 -ab ok":         "gh pr review 3 -a",
		"gh pr reopen 3":                "gh pr reopen",
		"gh run rerun 99 --failed":      "gh run rerun",
		"gh run cancel 99":              "gh run cancel",
		"gh release delete v1 --yes":    "gh release delete",
		"gh variable remove TOKEN":      "gh variable remove",
		// The shell splits or expands a word that goes on after gh.
		"gh${IFS}pr${IFS}merge 1":               "gh${IFS}pr${IFS}merge",
		"x; gh$IFS'pr'$IFS'merge' 1":            "gh$IFS'pr'$IFS'merge'",
		"{gh,pr,merge,1}":                       "gh,pr,merge,1}",
		"gh\x60echo\x60 pr merge 1":             "gh\x60echo\x60",
		"gh release upload v1 a.tgz":            "gh release upload",
		"gh repo edit --visibility public":      "gh repo edit",
		"gh repo delete o/r --yes":              "gh repo delete",
		"gh repo deploy-key add k.pub -w":       "gh repo deploy-key add",
		"gh secret set TOKEN < t":               "gh secret set",
		"gh auth token":                         "gh auth token",
		"gh auth status --show-token":           "gh auth status --show-token",
		"gh config set http_unix_socket /tmp/s": "gh config set",
		"gh ssh-key add k.pub":                  "gh ssh-key add",
		"gh extension install owner/gh-x":       "gh extension install",
		"gh ext exec x":                         "gh ext exec",
		"gh extensions upgrade --all":           "gh extensions upgrade",
		// gh code capstan cannot check: extensions, aliases, computed words.
		"gh x issue close":                      "gh x",
		"cd . && gh myext --flag":               "gh myext",
		"A=1 /opt/bin/gh co 3":                  "A=1 /opt/bin/gh co",
		"bash -c 'gh $(echo issue close) 1'":    "bash -c gh $(echo",
		`gh issue "$verb" 1`:                    `gh issue "$verb"`,
		"gh pr `echo merge` 1":                  "gh pr `echo",
		"gh $CMD 1":                             "gh $CMD",
		"gh issue {close,view} 1":               "gh issue {close,view}",
		"gh issue clos? 1":                      "gh issue clos?",
		"printf 'close 1' | xargs gh issue":     "xargs gh issue",
		"printf 'issue close 1' | xargs -n3 gh": "xargs -n3 gh",
		"f() { gh \"$@\"; }; f issue close 1":   `gh "$@"`,
		// A computed program, a shell alias, a continued line.
		"$GH pr merge 1":                     "$GH pr merge",
		"$(which gh) issue close 1":          "$(which gh) issue close",
		"x=1; `echo gh` pr merge 1":          "`echo gh` pr merge",
		`"${G}" api /user`:                   "${G} api",
		"alias g='gh'; g pr merge 1":         "alias g=gh",
		"gh pr \\\nmerge 1":                  "gh pr merge",
		"find . -name x -exec gh myext {} +": "find . -name x -exec gh myext",
		"ls | parallel gh issue":             "parallel gh issue",
		"if gh myext; then :; fi":            "if gh myext",
	}
	for cmd, want := range blocked {
		got, ok := BoundaryCommand(cmd)
		if !ok || got != want {
			t.Errorf("BoundaryCommand(%q) = %q, %v; want %q", cmd, got, ok, want)
		}
	}
	for _, cmd := range []string{"gh issue view 12", "gh pr create --fill", "gh issue list --label bug", "git push origin HEAD",
		"curl https://example.com", "echo closing the issue later", "gh pr view 3 --json state", "gh alias list",
		"gh pr review 3 --comment -b looks-good", "gh pr review 3 -c -b ok && ls -la", "gh pr review 3 -r -b fix-this", "gh run view 99 --log", "gh workflow list",
		"gh auth status", "gh repo view", "gh release view v1", "gh extension list", "gh --version", "gh", "which gh",
		"command -v gh >/dev/null && gh issue view $N", `gh pr view "$(git branch --show-current)"`, "ghc --version",
		"git commit -m 'use gh to read issues'", "ls | xargs grep gh", "gh-md-toc README.md"} {
		if m, ok := BoundaryCommand(cmd); ok {
			t.Errorf("BoundaryCommand(%q) matched %q", cmd, m)
		}
	}
}

// A policy with Boundary refuses boundary commands even where every tool
// is allowed, says why, and leaves other commands alone.
func TestPolicyBoundary(t *testing.T) {
	p := Policy{Allowed: []string{"*"}, Mode: ModeBypassPermissions, Boundary: "a work step may not; capstan closes the issue after the run completes"}
	d := p.Decide(tBash, bash("git status && gh issue close 5"))
	if d.Allowed || !strings.Contains(d.Reason, `"gh issue close" is a GitHub boundary action`) || !strings.HasSuffix(d.Reason, p.Boundary) {
		t.Fatalf("decision = %+v", d)
	}
	if d := p.Decide(tBash, bash("gh issue view 5")); !d.Allowed {
		t.Fatalf("read-only gh refused: %s", d.Reason)
	}
	p.Boundary = ""
	if d := p.Decide(tBash, bash("gh issue close 5")); !d.Allowed {
		t.Fatalf("without Boundary: %s", d.Reason)
	}
	for _, pat := range BoundaryDenyPatterns("github") {
		if err := tooldecl.ValidatePattern(pat); err != nil {
			t.Errorf("%s: %v", pat, err)
		}
	}
}

func FuzzBoundaryCommand(f *testing.F) {
	f.Add("gh issue close 1")
	f.Add("curl api.github.com")
	f.Add("x | xargs gh")
	f.Add("gh $(echo pr) merge")
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := BoundaryCommand(s)
		plain := shellUnquote.Replace(s)
		if ok && !strings.Contains(s, m) && !strings.Contains(plain, m) {
			t.Fatalf("match %q not in %q", m, s)
		}
		// The literal prefilters never hide a match of the rules, as
		// written or unquoted.
		any := false
		for _, r := range lineRules() {
			any = any || r.re.MatchString(s) || r.re.MatchString(plain)
		}
		for _, c := range []string{s, plain} {
			_, gh := ghRuleMatch(c)
			_, unchecked := uncheckedGH(c)
			any = any || gh || unchecked || computedGH().MatchString(c)
		}
		if any != ok {
			t.Fatalf("rules match %v, BoundaryCommand %v for %q", any, ok, s)
		}
	})
}

// The Bash tool decodes its input as encoding/json does: a key in
// another case, or a later duplicate, is its command; the boundary and the
// disallowedTools patterns see the same command.
func TestPolicyBashCommandAsTheToolReadsIt(t *testing.T) {
	p := Policy{Allowed: []string{"*"}, Disallowed: []string{"Bash(rm:*)"}, Mode: ModeBypassPermissions, Boundary: "a work step may not"}
	for _, input := range []string{
		`{"Command": "gh pr merge 1"}`,
		`{"command": "echo hi", "COMMAND": "gh pr merge 1"}`,
		`{"command": "gh pr merge 1", "Command": null}`,
		`{"command": "echo hi", "command": "rm -rf src"}`,
		`{"cOmmand": "rm -rf src"}`,
	} {
		if d := p.Decide(fakeTool{"Bash", KindExecute}, json.RawMessage(input)); d.Allowed {
			t.Errorf("%s allowed", input)
		}
	}
	if d := p.Decide(fakeTool{"Bash", KindExecute}, json.RawMessage(`{"Command": "echo hi"}`)); !d.Allowed {
		t.Errorf("echo refused: %s", d.Reason)
	}
}

// A GitHub MCP server's tools are held to the boundary too: merging and
// workflow runs by name, approvals and closing by their input, a shell
// server by the command it would run. Other MCP calls, read tools (list_,
// get_, search_ …) whatever their input, and other tools pass.
func TestPolicyBoundaryMCP(t *testing.T) {
	p := Policy{Allowed: []string{"*"}, Mode: ModeBypassPermissions, Boundary: "a work step may not"}
	refused := []struct {
		tool  string
		input string
		want  string
	}{
		{"mcp__github__merge_pull_request", `{"owner": "o", "repo": "r", "pullNumber": 3}`, `"merge_pull_request (github)"`},
		{"mcp__gh__run_workflow", `{"workflow_id": "deploy.yml", "ref": "main"}`, `"run_workflow (gh)"`},
		{"mcp__github__update_issue", `{"issue_number": 7, "state": "closed"}`, `"\"state\": \"closed\""`},
		{"mcp__github__create_pull_request_review", `{"pullNumber": 3, "event": "APPROVE"}`, `"\"event\": \"APPROVE\""`},
		{"mcp__shell__run", `{"command": "gh pr merge 3"}`, `"gh pr merge"`},
		// The server decodes JSON's \u escapes; the rules see through them.
		{"mcp__github__update_issue", `{"issue_number": 7, "state": "clos\u0065d"}`, `"\"state\":\"closed\""`},
		{"mcp__github__create_pull_request_review", `{"pullNumber": 3, "event": "\u0041PPROVE"}`, `"\"event\":\"APPROVE\""`},
		{"mcp__shell__run", `{"command": "gh pr m\u0065rge 3"}`, `"gh pr merge"`},
	}
	for _, tc := range refused {
		d := p.Decide(fakeTool{tc.tool, KindExecute}, json.RawMessage(tc.input))
		if d.Allowed || !strings.Contains(d.Reason, tc.want+" is a GitHub boundary action") {
			t.Errorf("%s %s: %+v", tc.tool, tc.input, d)
		}
	}
	for _, c := range []struct{ tool, input string }{
		{"mcp__github__update_issue", `{"issue_number": 7, "labels": ["done"]}`},
		{"mcp__github__create_pull_request_review", `{"pullNumber": 3, "event": "COMMENT", "body": "ok"}`},
		{"mcp__github__list_issues", `{"state": "closed"}`},
		{"mcp__github__search_code", `{"query": "gh pr merge"}`},
		{"Write", `{"file_path": "notes.md", "content": "then gh pr merge 3"}`},
	} {
		if d := p.Decide(fakeTool{c.tool, KindEdit}, json.RawMessage(c.input)); !d.Allowed {
			t.Errorf("%s %s refused: %s", c.tool, c.input, d.Reason)
		}
	}
}
