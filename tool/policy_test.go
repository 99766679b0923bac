package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/tool/tooldecl"
)

type fakeTool struct {
	name string
	kind Kind
}

func (f fakeTool) Spec() Spec { return Spec{Name: f.name} }
func (f fakeTool) Kind() Kind { return f.kind }
func (f fakeTool) Run(context.Context, json.RawMessage) (Result, error) {
	return Result{}, nil
}

var (
	tRead  = fakeTool{"Read", KindRead}
	tGlob  = fakeTool{"Glob", KindRead}
	tGrep  = fakeTool{"Grep", KindRead}
	tWrite = fakeTool{"Write", KindEdit}
	tEdit  = fakeTool{"Edit", KindEdit}
	tBash  = fakeTool{"Bash", KindExecute}
	tMCP   = fakeTool{"mcp__github__list_issues", KindExecute}
	tMCP2  = fakeTool{"mcp__slack__post", KindExecute}
)

func in(kv ...string) json.RawMessage {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return b
}

func bash(cmd string) json.RawMessage { return in("command", cmd) }
func file(p string) json.RawMessage   { return in("file_path", p) }

func TestPolicyDecide(t *testing.T) {
	cases := []struct {
		name  string
		p     Policy
		tool  Tool
		input json.RawMessage
		allow bool
	}{
		// Zero policy: mode default, no patterns → read tools only.
		{"zero read", Policy{}, tRead, file("a"), true},
		{"zero glob", Policy{}, tGlob, in("pattern", "**"), true},
		{"zero write", Policy{}, tWrite, file("a"), false},
		{"zero bash", Policy{}, tBash, bash("ls"), false},
		{"zero mcp", Policy{}, tMCP, nil, false},

		// default mode: edit/execute only when named.
		{"default named write", Policy{Allowed: []string{"Read", "Write"}}, tWrite, file("a"), true},
		{"default unnamed edit", Policy{Allowed: []string{"Read", "Write"}}, tEdit, file("a"), false},
		{"default unnamed read", Policy{Allowed: []string{"Write"}}, tRead, file("a"), false},
		{"default star", Policy{Allowed: []string{"*"}}, tBash, bash("rm -rf /tmp/x"), true},
		{"default mcp glob", Policy{Allowed: []string{"mcp__github__*"}}, tMCP, nil, true},
		{"default mcp glob other server", Policy{Allowed: []string{"mcp__github__*"}}, tMCP2, nil, false},

		// Bash prefix rules.
		{"prefix exact", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log"), true},
		{"prefix args", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log --oneline -5"), true},
		{"prefix tab", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log\t-1"), true},
		{"prefix surrounding space", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("  git log -1  "), true},
		{"prefix word boundary", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git logout"), false},
		{"prefix other cmd", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git push"), false},
		{"prefix chain ;", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log; rm -rf ~"), false},
		{"prefix chain &&", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log && rm -rf ~"), false},
		{"prefix chain ||", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log || curl evil"), false},
		{"prefix pipe", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log | sh"), false},
		{"prefix background", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log & rm x"), false},
		{"prefix redirect out", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log > ~/.bashrc"), false},
		{"prefix redirect in", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log < /etc/shadow"), false},
		{"prefix subshell", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log $(rm -rf ~)"), false},
		{"prefix backtick", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log `rm -rf ~`"), false},
		{"prefix newline", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log\nrm -rf ~"), false},
		{"prefix carriage return", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log\rrm -rf ~"), false},
		{"prefix process subst", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, bash("git log <(cat /etc/passwd)"), false},
		{"exact rule", Policy{Allowed: []string{"Bash(go test ./...)"}}, tBash, bash("go test ./..."), true},
		{"exact rule extra arg", Policy{Allowed: []string{"Bash(go test ./...)"}}, tBash, bash("go test ./... -run X"), false},
		{"exact rule chain", Policy{Allowed: []string{"Bash(go test ./...)"}}, tBash, bash("go test ./...; id"), false},
		{"bash star rule", Policy{Allowed: []string{"Bash(*)"}}, tBash, bash("a; b"), true},
		{"bash no command", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, in("description", "x"), false},
		{"bash non-string command", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, json.RawMessage(`{"command":["git","log"]}`), false},
		{"bash bad json", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, json.RawMessage(`{`), false},
		{"bash duplicate key last wins", Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, json.RawMessage(`{"command":"git log","command":"rm -rf ~"}`), false},

		// Path rules.
		{"edit in dir", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("src/a/b.go"), true},
		{"edit dir itself", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("src"), true},
		{"edit dot slash", Policy{Allowed: []string{"Edit(./src/**)"}}, tEdit, file("./src/a.go"), true},
		{"edit outside dir", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("docs/a.md"), false},
		{"edit prefix lookalike", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("srcx/a.go"), false},
		{"edit dotdot inside", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("src/../docs/a.md"), false},
		{"edit dotdot escape", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("../src/a.go"), false},
		{"edit dotdot escape deep", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("src/../../src/a.go"), false},
		{"edit absolute no workdir", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, file("/src/a.go"), false},
		{"edit absolute in workdir", Policy{Allowed: []string{"Edit(src/**)"}, WorkDir: "/w"}, tEdit, file("/w/src/a.go"), true},
		{"edit absolute outside workdir", Policy{Allowed: []string{"Edit(src/**)"}, WorkDir: "/w"}, tEdit, file("/other/src/a.go"), false},
		{"edit glob ext", Policy{Allowed: []string{"Edit(**/*.md)"}}, tEdit, file("docs/x/y.md"), true},
		{"edit glob ext top", Policy{Allowed: []string{"Edit(**/*.md)"}}, tEdit, file("y.md"), true},
		{"edit glob ext miss", Policy{Allowed: []string{"Edit(**/*.md)"}}, tEdit, file("y.go"), false},
		{"edit everything", Policy{Allowed: []string{"Edit(**)"}}, tEdit, file("a/b/c"), true},
		{"edit single star", Policy{Allowed: []string{"Edit(*.go)"}}, tEdit, file("sub/a.go"), false},
		{"edit braces", Policy{Allowed: []string{"Edit(src/*.{ts,tsx})"}}, tEdit, file("src/a.tsx"), true},
		{"edit no path", Policy{Allowed: []string{"Edit(src/**)"}}, tEdit, in("old_string", "x"), false},
		{"read rule", Policy{Allowed: []string{"Read(docs/**)"}}, tRead, file("docs/a"), true},
		{"grep rule no path means workdir", Policy{Allowed: []string{"Grep(src/**)"}}, tGrep, in("pattern", "src/x"), false},
		{"grep rule path", Policy{Allowed: []string{"Grep(src/**)"}}, tGrep, in("pattern", "x", "path", "src/pkg"), true},
		{"grep root rule", Policy{Allowed: []string{"Grep(.)"}}, tGrep, in("pattern", "x"), true},
		{"glob rule literal prefix", Policy{Allowed: []string{"Glob(src/**)"}}, tGlob, in("pattern", "src/**/*.go"), true},
		{"glob rule path", Policy{Allowed: []string{"Glob(src/**)"}}, tGlob, in("pattern", "*.go", "path", "src"), true},
		{"glob rule whole tree", Policy{Allowed: []string{"Glob(src/**)"}}, tGlob, in("pattern", "**/*.go"), false},
		{"glob rule escape", Policy{Allowed: []string{"Glob(src/**)"}}, tGlob, in("pattern", "src/../../*"), false},

		// Other tools: file_path/path are paths, command is matched raw.
		{"mcp path rule", Policy{Allowed: []string{"mcp__fs__read(src/**)"}}, fakeTool{"mcp__fs__read", KindRead}, in("path", "src/a"), true},
		{"mcp path rule escape", Policy{Allowed: []string{"mcp__fs__read(src/**)"}}, fakeTool{"mcp__fs__read", KindRead}, in("path", "src/../../x"), false},
		{"mcp file_path rule escape", Policy{Allowed: []string{"mcp__fs__read(src/**)"}}, fakeTool{"mcp__fs__read", KindRead}, in("file_path", "../src/x"), false},
		{"mcp command rule dotdot", Policy{Allowed: []string{"mcp__sh__run(src/**)"}}, fakeTool{"mcp__sh__run", KindRead}, in("command", "src/../../x"), false},

		// Disallowed wins.
		{"deny name", Policy{Allowed: []string{"*"}, Disallowed: []string{"Bash"}}, tBash, bash("ls"), false},
		{"deny glob", Policy{Allowed: []string{"*"}, Disallowed: []string{"mcp__*"}}, tMCP, nil, false},
		{"deny bypass", Policy{Mode: ModeBypassPermissions, Disallowed: []string{"Write"}}, tWrite, file("a"), false},
		{"deny rule", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("rm -rf x"), false},
		{"deny rule other cmd", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("ls -la"), true},
		{"deny rule chained", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("ls; rm -rf x"), false},
		{"deny rule and-chain", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("true&&rm -rf x"), false},
		{"deny rule subshell", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("echo $(rm -rf x)"), false},
		{"deny rule backtick", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("echo `rm -rf x`"), false},
		{"deny rule group", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("(rm -rf x)"), false},
		{"deny rule env prefix", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("LC_ALL=C rm -rf x"), false},
		{"deny rule sudo", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("sudo rm -rf x"), false},
		{"deny rule timeout", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("timeout 5 rm -rf x"), false},
		{"deny rule full path", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("/bin/rm -rf x"), false},
		{"deny rule newline", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("ls\nrm x"), false},
		{"deny rule lookalike", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, bash("rmdir x"), true},
		{"deny multiword", Policy{Allowed: []string{"Bash"}, Disallowed: []string{"Bash(git push:*)"}}, tBash, bash("git add . && git push --force"), false},
		{"deny path rule", Policy{Mode: ModeAcceptEdits, Disallowed: []string{"Edit(secrets/**)"}}, tEdit, file("secrets/key"), false},
		{"deny path rule dotdot", Policy{Mode: ModeAcceptEdits, Disallowed: []string{"Edit(secrets/**)"}}, tEdit, file("src/../secrets/key"), false},
		{"deny path rule absolute", Policy{Mode: ModeAcceptEdits, Disallowed: []string{"Edit(secrets/**)"}, WorkDir: "/w"}, tEdit, file("/w/secrets/key"), false},
		{"deny path rule other", Policy{Mode: ModeAcceptEdits, Disallowed: []string{"Edit(secrets/**)"}}, tEdit, file("src/key"), true},
		{"deny malformed fails closed", Policy{Allowed: []string{"*"}, Disallowed: []string{"Bash(rm:*"}}, tBash, bash("ls"), false},
		{"deny malformed other tool", Policy{Allowed: []string{"*"}, Disallowed: []string{"Bash(rm:*"}}, tRead, file("a"), true},
		{"allow malformed fails closed", Policy{Allowed: []string{"Bash(ls"}}, tBash, bash("ls"), false},

		// plan: read only, whatever is allowed.
		{"plan read", Policy{Mode: ModePlan}, tRead, file("a"), true},
		{"plan write named", Policy{Mode: ModePlan, Allowed: []string{"Write"}}, tWrite, file("a"), false},
		{"plan bash star", Policy{Mode: ModePlan, Allowed: []string{"*"}}, tBash, bash("ls"), false},
		{"plan mcp", Policy{Mode: ModePlan, Allowed: []string{"*"}}, tMCP, nil, false},

		// acceptEdits: read + edit; execute only when named.
		{"acceptEdits write", Policy{Mode: ModeAcceptEdits}, tWrite, file("a"), true},
		{"acceptEdits edit", Policy{Mode: ModeAcceptEdits}, tEdit, file("a"), true},
		{"acceptEdits bash", Policy{Mode: ModeAcceptEdits}, tBash, bash("ls"), false},
		{"acceptEdits bash named", Policy{Mode: ModeAcceptEdits, Allowed: []string{"Read", "Edit", "Bash(ls:*)"}}, tBash, bash("ls -l"), true},
		{"acceptEdits allowlist limits edits", Policy{Mode: ModeAcceptEdits, Allowed: []string{"Read"}}, tWrite, file("a"), false},

		// bypassPermissions: everything not disallowed, within allowedTools.
		{"bypass bash", Policy{Mode: ModeBypassPermissions}, tBash, bash("anything; goes"), true},
		{"bypass mcp", Policy{Mode: ModeBypassPermissions}, tMCP, nil, true},
		{"bypass allowlist still limits", Policy{Mode: ModeBypassPermissions, Allowed: []string{"Read"}}, tBash, bash("ls"), false},

		// An unknown mode is as strict as default.
		{"unknown mode", Policy{Mode: "yolo"}, tWrite, file("a"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.p.Decide(c.tool, c.input)
			if d.Allowed != c.allow {
				t.Fatalf("Decide = %+v, want allowed=%v", d, c.allow)
			}
			if !d.Allowed && d.Reason == "" {
				t.Error("denial without a reason")
			}
			// A tool never offered must never be allowed.
			if d.Allowed && !c.p.MayUse(c.tool) {
				t.Error("Decide allows a call of a tool MayUse hides")
			}
		})
	}
}

func TestPolicyMayUse(t *testing.T) {
	cases := []struct {
		p    Policy
		tool Tool
		want bool
	}{
		{Policy{}, tRead, true},
		{Policy{}, tBash, false},
		{Policy{Allowed: []string{"Bash(git log:*)"}}, tBash, true}, // offered; calls checked by Decide
		{Policy{Allowed: []string{"Bash(git log:*)"}}, tRead, false},
		{Policy{Allowed: []string{"*"}, Disallowed: []string{"Bash"}}, tBash, false},
		{Policy{Allowed: []string{"*"}, Disallowed: []string{"Bash(rm:*)"}}, tBash, true}, // only some calls denied
		{Policy{Allowed: []string{"*"}, Disallowed: []string{"Bash(rm:*"}}, tBash, false},
		{Policy{Mode: ModePlan, Allowed: []string{"*"}}, tEdit, false},
		{Policy{Mode: ModeAcceptEdits}, tEdit, true},
		{Policy{Mode: ModeAcceptEdits}, tMCP, false},
		{Policy{Mode: ModeBypassPermissions}, tMCP, true},
		{Policy{Allowed: []string{"mcp__github__*"}}, tMCP, true},
		{Policy{Allowed: []string{"mcp__github__*"}}, tMCP2, false},
	}
	for i, c := range cases {
		if got := c.p.MayUse(c.tool); got != c.want {
			t.Errorf("%d: MayUse(%s) under %+v = %v", i, c.tool.Spec().Name, c.p, got)
		}
	}
}

func TestValidatePatternAndMode(t *testing.T) {
	good := []string{"Read", "*", "mcp__srv__*", "Bash(git log:*)", "Bash(go test ./...)", "Edit(src/**)", "Edit(**/*.{ts,tsx})", "Bash(*)"}
	bad := []string{"", "()", "Bash(", "Bash(x", "Bash)", "Bash()", "Read[", "Edit(src/[)"}
	for _, p := range good {
		if err := tooldecl.ValidatePattern(p); err != nil {
			t.Errorf("ValidatePattern(%q) = %v", p, err)
		}
	}
	for _, p := range bad {
		if err := tooldecl.ValidatePattern(p); err == nil {
			t.Errorf("ValidatePattern(%q) accepted", p)
		}
	}
	for _, m := range append([]string{""}, permissionModes...) {
		if err := ValidateMode(m); err != nil {
			t.Error(err)
		}
	}
	if err := ValidateMode("acceptedits"); err == nil || !strings.Contains(err.Error(), "acceptEdits") {
		t.Errorf("bad mode: %v", err)
	}
}

// FuzzPolicyPattern checks the policy's invariants for arbitrary patterns
// and commands: no panic; disallowed always wins; plan never allows a
// non-read tool; a Bash prefix rule never allows a command with shell
// control characters; a call allowed by Decide is of a tool MayUse offers.
func FuzzPolicyPattern(f *testing.F) {
	f.Add("Bash(git log:*)", "git log; rm -rf /", "src/a.go")
	f.Add("Edit(src/**)", "ls", "../src/a.go")
	f.Add("mcp__*", "x", "/abs")
	f.Add("*", "", "")
	f.Add("Bash(", "ls", "a")
	f.Fuzz(func(t *testing.T, pattern, command, filePath string) {
		_ = tooldecl.ValidatePattern(pattern)
		tools := []Tool{tRead, tWrite, tEdit, tBash, tMCP, tGlob, tGrep}
		inputs := []json.RawMessage{bash(command), file(filePath), in("pattern", command, "path", filePath)}
		for _, mode := range permissionModes {
			allow := Policy{Allowed: []string{pattern}, Mode: mode}
			deny := Policy{Allowed: []string{"*"}, Disallowed: []string{pattern}, Mode: mode}
			for _, tl := range tools {
				for _, input := range inputs {
					d := allow.Decide(tl, input)
					if d.Allowed && !allow.MayUse(tl) {
						t.Fatalf("%q allows %s but MayUse hides it", pattern, tl.Spec().Name)
					}
					if d.Allowed && mode == ModePlan && tl.Kind() != KindRead {
						t.Fatalf("plan allowed %s", tl.Spec().Name)
					}
					if d.Allowed && tl.Spec().Name == "Bash" && strings.HasSuffix(pattern, ":*)") {
						for _, c := range shellControl {
							if strings.Contains(command, c) {
								t.Fatalf("prefix rule %q allowed chained command %q", pattern, command)
							}
						}
					}
					if allow.Decide(tl, input).Allowed && deny.Decide(tl, input).Allowed && patternMatches(pattern, tl.Spec().Name, &callArgument{p: deny, name: tl.Spec().Name, input: input}, false) {
						t.Fatalf("%q both allows and fails to deny %s %s", pattern, tl.Spec().Name, input)
					}
				}
			}
		}
	})
}
