package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Git runs git for capstan itself (the git-clean validator's repository
// reads, GitHub repository discovery, the pipeline's history reads, the
// scale-out worker's checkout and commit). Make one with NewGit when a run
// starts; its program path is fixed from then on.
type Git struct {
	path string
	env  []string
	// ssh is the ssh program the worker's fetches use, resolved like git.
	ssh string
	// credentials are the user's own credential helpers (from the global
	// configuration), for a Git made by WithUserCredentials.
	credentials []string
	// repo, when set, are the driver pins of one repository, read once
	// (WithRepoPins).
	repo *RepoPins
}

// RepoPins is what Command and Output read of one repository's
// configuration before each command — the driver keys it names, pinned
// off, and its own keys (core.worktree, URL rewrites) — as ReadRepoPins
// read it once.
type RepoPins struct {
	dir  string
	pins [][2]string
	keys []string
}

// ReadRepoPins reads the configuration of the repository at dir once, for
// WithRepoPins.
func (g *Git) ReadRepoPins(ctx context.Context, dir string) *RepoPins {
	if slices.Contains(g.env, "GIT_CONFIG_GLOBAL=/dev/null") && slices.Contains(g.env, "GIT_CONFIG_NOSYSTEM=1") {
		// g reads no global or system configuration: the keys driverPins
		// reads are the repository's own, which repoKeys lists, so one
		// git process answers both (a config.worktree only adds keys,
		// which pins more off and checks more).
		out, err := g.configList(ctx, dir, slices.Clone(g.env))
		if err != nil {
			return &RepoPins{dir: dir}
		}
		return &RepoPins{dir: dir, pins: pinsOf(out), keys: configKeys(out)}
	}
	return &RepoPins{dir: dir, pins: g.driverPins(ctx, dir), keys: g.repoKeys(ctx, dir)}
}

// configList lists the configuration keys git reads in dir with the
// environment env (NUL-separated, as config --name-only --list -z prints
// them); extra are options of git config (--local).
func (g *Git) configList(ctx context.Context, dir string, env []string, extra ...string) (string, error) {
	args := append([]string{"--no-pager", "-C", dir, "config"}, extra...)
	cmd := exec.CommandContext(ctx, g.path, append(args, "--includes", "--name-only", "--list", "-z")...)
	cmd.Env = env
	out, err := cmd.Output()
	return string(out), err
}

// WithRepoPins returns g for a caller that keeps the configuration of the
// repository p was read from as it was then (the scale-out worker puts
// back the .git/config it cloned before every use of its checkout): its
// commands in that directory are pinned and checked as p says, without
// reading the configuration again before each one. Commands elsewhere
// read it as usual.
func (g *Git) WithRepoPins(p *RepoPins) *Git {
	c := *g
	c.repo = p
	return &c
}

// pinnedConfig is the configuration every git capstan runs is given on
// its command line, which wins over every configuration file: nothing a
// repository's .git/config (or an included file) names is run.
var pinnedConfig = [][2]string{
	{"core.hooksPath", "/dev/null"},
	{"core.fsmonitor", "false"},
	{"core.pager", "cat"},
	{"core.editor", ":"},
	{"sequence.editor", ":"},
	{"core.askPass", ""},
	{"core.sshCommand", "ssh"},
	{"core.gitProxy", ""},
	{"core.alternateRefsCommand", ""},
	{"credential.helper", ""},
	{"diff.external", ""},
	{"gpg.program", ""},
	{"gpg.openpgp.program", ""},
	{"gpg.x509.program", ""},
	{"gpg.ssh.program", ""},
	{"gpg.ssh.defaultKeyCommand", ""},
	{"gpg.ssh.allowedSignersFile", "/dev/null"},
	{"commit.gpgSign", "false"},
	{"tag.gpgSign", "false"},
	{"tag.forceSignAnnotated", "false"},
	{"push.gpgSign", "false"},
	{"log.showSignature", "false"},
	{"merge.verifySignatures", "false"},
	{"protocol.ext.allow", "never"},
	{"status.showUntrackedFiles", "normal"},
	{"trace2.normalTarget", ""},
	{"trace2.perfTarget", ""},
	{"trace2.eventTarget", ""},
}

// GitPinnedKeys returns the configuration keys every git capstan runs is
// given (the driver keys a repository names — filter.<name>.clean and the
// like — besides).
func GitPinnedKeys() []string {
	out := make([]string, len(pinnedConfig))
	for i, kv := range pinnedConfig {
		out[i] = kv[0]
	}
	return out
}

// pinnedEnv is the environment git is given besides the minimal base: no
// system or global configuration file, no terminal prompt, no pager,
// replace refs ignored (a model-made refs/replace/ would change what a
// commit reads as), C messages.
var pinnedEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
	"GIT_PAGER=cat", "PAGER=cat", "GIT_EDITOR=:", "GIT_NO_REPLACE_OBJECTS=1", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C",
}

// NewGit resolves git on the PATH of environ (see LookPath: never inside
// one of workDirs) and returns the runner of capstan's own git commands,
// whose environment is the minimal base of environ and the pins.
func NewGit(environ []string, workDirs ...string) (*Git, error) {
	g, path := newWorkDirGuard(workDirs), pathOf(environ)
	p, err := g.lookPath("git", path)
	if err != nil {
		return nil, err
	}
	ssh, err := g.lookPath("ssh", path)
	if err != nil {
		ssh = "/usr/bin/ssh" // not installed, or inside a work dir: never one from PATH
	}
	// The programs git itself starts (ssh, a remote helper) come from a
	// PATH without the work dirs' entries.
	return &Git{path: p, env: gitEnv(environ, g.pathOutside(path)), ssh: ssh}, nil
}

// lastGitEnv is the environment gitEnv made last, with its inputs.
var lastGitEnv struct {
	mu      sync.Mutex
	environ []string
	path    string
	env     []string
}

// gitEnv is the environment of capstan's git commands: the minimal base
// of environ, PATH path and the pins. When environ and path are those of
// the previous call (the agents one program builds, each in its own work
// dir outside PATH), it returns the same list instead of a new copy
// (about 0.6 KB an agent keeps). The list is shared and read-only; its
// capacity is its length, so an append copies it.
func gitEnv(environ []string, path string) []string {
	lastGitEnv.mu.Lock()
	defer lastGitEnv.mu.Unlock()
	if lastGitEnv.env != nil && path == lastGitEnv.path && slices.Equal(environ, lastGitEnv.environ) {
		return lastGitEnv.env
	}
	env := slices.DeleteFunc(Minimal(environ), func(kv string) bool {
		return strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "PATH=")
	})
	env = slices.Clip(append(append(env, "PATH="+path), pinnedEnv...))
	lastGitEnv.environ, lastGitEnv.path, lastGitEnv.env = slices.Clone(environ), path, env
	return env
}

// WithUserCredentials returns a Git for commands that reach a remote
// (the scale-out client's push, the worker's clone and fetch): like g, but
// the user's global configuration is read (their url rewrites, identity)
// and their credential helpers and ssh agent (SSH_AUTH_SOCK of environ)
// work. Every program the repository's own configuration names stays
// pinned off; the credential helpers used are the ones the global
// configuration lists, given again after the pins.
func (g *Git) WithUserCredentials(ctx context.Context, environ []string) *Git {
	u := &Git{path: g.path, ssh: g.ssh, repo: g.repo}
	for _, kv := range g.env {
		if kv != "GIT_CONFIG_GLOBAL=/dev/null" {
			u.env = append(u.env, kv)
		}
	}
	for _, kv := range environ {
		if strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			u.env = append(u.env, kv)
		}
	}
	cmd := exec.CommandContext(ctx, g.path, "config", "--global", "--get-all", "credential.helper")
	cmd.Env = u.env
	if out, err := cmd.Output(); err == nil {
		for h := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			if h = strings.TrimSpace(h); h != "" {
				u.credentials = append(u.credentials, h)
			}
		}
	}
	return u
}

// PathOutside is path (a PATH value) without its relative entries and
// those inside one of workDirs: the PATH of a program capstan runs for
// itself, whose own children (ssh, a remote helper) must not come from a
// work dir either. An entry given twice is kept once, where it first
// appears (the later one would find nothing new).
func PathOutside(path string, workDirs ...string) string {
	return newWorkDirGuard(workDirs).pathOutside(path)
}

// pathOf is the PATH entry of environ.
func pathOf(environ []string) string { return valueOf(environ, "PATH") }

// Path is the git program this Git runs.
func (g *Git) Path() string { return g.path }

// Command returns git args run in dir with the pinned configuration and
// environment, the driver keys dir's repository configuration names
// (filters, diff and merge drivers, credential helpers, remote programs)
// pinned too. dir is also marked a safe directory (git refuses a
// repository owned by another user otherwise; what made that check
// necessary, programs named by the repository's configuration, is what
// the pins turn off).
func (g *Git) Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	pre := []string{"--no-pager", "-C", dir}
	for _, kv := range g.config(ctx, dir) {
		pre = append(pre, "-c", kv[0]+"="+kv[1])
	}
	if abs, err := filepath.Abs(dir); err == nil {
		pre = append(pre, "-c", "safe.directory="+abs)
	}
	cmd := exec.CommandContext(ctx, g.path, append(pre, args...)...)
	cmd.Env = append(slices.Clone(g.env), g.worktreeEnv(ctx, dir)...)
	return cmd
}

// Output runs git args in dir (see Command) and returns its standard
// output; a failure's error carries git's standard error.
//
// A command that reaches a remote (clone, fetch, push, pull, ls-remote) is
// refused while the repository's own configuration rewrites remote URLs
// (url.<base>.insteadOf, url.<base>.pushInsteadOf): that configuration is
// the model's to write, a rewrite cannot be taken back on the command
// line, and it would send the push — and the user's credentials — where
// the model points it. The user's global rewrites still apply.
func (g *Git) Output(ctx context.Context, dir string, args ...string) ([]byte, error) {
	if GitReachesRemote(args) {
		if keys := g.urlRewrites(ctx, dir); len(keys) > 0 {
			return nil, fmt.Errorf("git %s: refused: the repository's configuration rewrites remote URLs (%s in %s), which capstan's git does not follow: remove it with git -C %s config --local --unset-all %s (put a rewrite you want in your global configuration, ~/.gitconfig)",
				strings.Join(args, " "), strings.Join(keys, ", "), filepath.Join(dir, ".git", "config"), shellWord(dir), keys[0])
		}
	}
	cmd := g.Command(ctx, dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		if msg != "" {
			return out, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, msg)
		}
		return out, fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// GitReachesRemote reports whether a git command line contacts a remote.
func GitReachesRemote(args []string) bool {
	for _, a := range args {
		switch a {
		case "clone", "fetch", "push", "pull", "ls-remote", "remote-https", "archive":
			return true
		}
	}
	return false
}

// keysOf is repoKeys of dir, from the pins WithRepoPins gave when they
// are dir's.
func (g *Git) keysOf(ctx context.Context, dir string) []string {
	if g.repo != nil && g.repo.dir == dir {
		return g.repo.keys
	}
	return g.repoKeys(ctx, dir)
}

// repoKeys lists the keys of dir's repository configuration alone
// (.git/config and the files it includes; never the user's or the
// system's), lower-cased section and name. Reading it runs nothing.
func (g *Git) repoKeys(ctx context.Context, dir string) []string {
	out, err := g.configList(ctx, dir, append(slices.Clone(g.env), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"), "--local")
	if err != nil {
		return nil
	}
	return configKeys(out)
}

// configKeys are the keys of a configList output, trimmed.
func configKeys(out string) []string {
	var keys []string
	for k := range strings.SplitSeq(out, "\x00") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// urlRewrites are the url.<base>.insteadOf and pushInsteadOf keys of dir's
// repository configuration.
func (g *Git) urlRewrites(ctx context.Context, dir string) []string {
	var out []string
	for _, k := range g.keysOf(ctx, dir) {
		l := strings.ToLower(k)
		if strings.HasPrefix(l, "url.") && (strings.HasSuffix(l, ".insteadof") || strings.HasSuffix(l, ".pushinsteadof")) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// topLevel is the directory holding the .git of the repository dir is in
// (dir itself or the nearest parent with a .git entry), "" when none.
func topLevel(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// shellWord quotes s for a POSIX shell.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// worktreeEnv pins the work tree of dir's repository to the directory
// that holds its .git (GIT_WORK_TREE) when the repository's configuration
// sets core.worktree: that setting would make git read, and check out
// into, another directory — a git-clean check of an empty directory
// passes — and a -c on the command line does not override it.
func (g *Git) worktreeEnv(ctx context.Context, dir string) []string {
	if !slices.ContainsFunc(g.keysOf(ctx, dir), func(k string) bool { return strings.EqualFold(k, "core.worktree") }) {
		return nil
	}
	if top := topLevel(dir); top != "" {
		return []string{"GIT_WORK_TREE=" + top}
	}
	return nil
}

// config is pinnedConfig and the driver keys of dir's configuration.
func (g *Git) config(ctx context.Context, dir string) [][2]string {
	pins := slices.Clone(pinnedConfig)
	for i, kv := range pins {
		if kv[0] == "core.sshCommand" {
			pins[i][1] = g.ssh
		}
	}
	if g.repo != nil && g.repo.dir == dir {
		pins = append(pins, g.repo.pins...)
	} else {
		pins = append(pins, g.driverPins(ctx, dir)...)
	}
	for _, h := range g.credentials {
		pins = append(pins, [2]string{"credential.helper", h})
	}
	return pins
}

// driverPins lists the keys of dir's repository configuration (and the
// files it includes) that name a program under a name of the
// repository's choosing, each pinned off: a filter's clean, smudge and
// process commands (and required=false, so the file is read as it is), a
// diff driver's textconv and command, a merge driver, a URL's credential
// helper, a remote's upload-pack, receive-pack and proxy. (A remote's vcs
// names a git-remote-<vcs> program, which git looks up on its PATH: that
// PATH has no entry inside a work dir.) Reading
// the configuration runs nothing.
func (g *Git) driverPins(ctx context.Context, dir string) [][2]string {
	out, err := g.configList(ctx, dir, slices.Clone(g.env))
	if err != nil {
		return nil // not a repository, or no local configuration
	}
	return pinsOf(out)
}

// pinsOf are the driver pins of the keys of a configList output (see
// driverPins).
func pinsOf(out string) [][2]string {
	var pins [][2]string
	seen := map[string]bool{}
	add := func(k, v string) {
		if !seen[k] {
			seen[k] = true
			pins = append(pins, [2]string{k, v})
		}
	}
	for key := range strings.SplitSeq(out, "\x00") {
		key = strings.ToLower(strings.TrimSpace(key))
		section, rest, ok := strings.Cut(key, ".")
		if !ok {
			continue
		}
		dot := strings.LastIndex(rest, ".")
		if dot < 0 {
			continue
		}
		sub, name := rest[:dot], rest[dot+1:]
		// The subsection keeps the case it was written in; git compares
		// it case-sensitively, so it is read back from the original key.
		orig := originalSubsection(out, section, sub, name)
		prefix := section + "." + orig + "."
		switch section {
		case "filter":
			for _, k := range []string{"clean", "smudge", "process"} {
				add(prefix+k, "")
			}
			add(prefix+"required", "false")
		case "diff":
			add(prefix+"textconv", "")
			add(prefix+"command", "")
		case "merge":
			add(prefix+"driver", "")
		case "credential":
			add(prefix+"helper", "")
		case "remote":
			add(prefix+"uploadpack", "git-upload-pack")
			add(prefix+"receivepack", "git-receive-pack")
			add(prefix+"proxy", "")
		}
	}
	return pins
}

// originalSubsection finds the subsection of section.sub.name as written
// in the NUL-separated key list (git lowercases section and name, not the
// subsection).
func originalSubsection(list, section, sub, name string) string {
	for key := range strings.SplitSeq(list, "\x00") {
		k := strings.TrimSpace(key)
		if len(k) == len(section)+1+len(sub)+1+len(name) && strings.EqualFold(k, section+"."+sub+"."+name) {
			return k[len(section)+1 : len(section)+1+len(sub)]
		}
	}
	return sub
}

// GitConfigEnv returns the environment entries that give the git of a
// command capstan runs for the agent (a command validator's git status)
// the same pinned configuration as capstan's own git commands, as
// GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n, which win over
// every configuration file. The driver keys are read from dir's
// repository with g (g nil: the fixed pins only). The user's global
// configuration stays in effect (a test suite may need the identity it
// names), minus every program it could name. A core.worktree the
// repository's configuration sets is overridden with GIT_WORK_TREE.
func GitConfigEnv(ctx context.Context, g *Git, dir string) []string {
	pins := slices.Clone(pinnedConfig)
	var env []string
	if g != nil {
		pins = g.config(ctx, dir)
		env = g.worktreeEnv(ctx, dir)
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(pins)), "GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1")
	for i, kv := range pins {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env
}
