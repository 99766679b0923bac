package tool

import (
	"strings"
	"testing"
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
	}
	for cmd, want := range blocked {
		got, ok := BoundaryCommand(cmd)
		if !ok || got != want {
			t.Errorf("BoundaryCommand(%q) = %q, %v; want %q", cmd, got, ok, want)
		}
	}
	for _, cmd := range []string{"gh issue view 12", "gh pr create --fill", "gh issue list --label bug", "git push origin HEAD",
		"curl https://example.com", "echo closing the issue later", "gh pr view 3 --json state", "gh alias list"} {
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
	for _, pat := range BoundaryDenyPatterns() {
		if err := ValidatePattern(pat); err != nil {
			t.Errorf("%s: %v", pat, err)
		}
	}
}

func FuzzBoundaryCommand(f *testing.F) {
	f.Add("gh issue close 1")
	f.Add("curl api.github.com")
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := BoundaryCommand(s)
		plain := shellUnquote.Replace(s)
		if ok && !strings.Contains(s, m) && !strings.Contains(plain, m) {
			t.Fatalf("match %q not in %q", m, s)
		}
		// The word prefilter never hides a match of the rules, as written
		// or unquoted.
		any := false
		for _, re := range boundaryCommands() {
			any = any || re.MatchString(s) || re.MatchString(plain)
		}
		if any != ok {
			t.Fatalf("rules match %v, BoundaryCommand %v for %q", any, ok, s)
		}
	})
}
