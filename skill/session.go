package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// session is the state of one Act run: budgets, Blackboard, caches, memo.
type session struct {
	rt      *Runtime
	sk      *Skill
	in      Input
	budgets Budgets
	build   string // absolute build directory
	start   time.Time

	usage     event.Usage
	toolCalls int
	metrics   Metrics
	evidence  []event.SkillEvidence

	// readCache maps a path to the content hash last injected for it;
	// injected maps a content hash to the first path it was injected as.
	readCache map[string]string
	injected  map[string]string
	// memo remembers failed actions by (action + inputs_hash).
	memo map[string]string
	// repeats counts identical actions, for cycle detection.
	repeats map[string]int

	blackboard map[string]json.RawMessage
	artifacts  map[string]*Artifact
	versions   map[string]int

	diskWritten       int64
	missing           map[string]bool
	scriptFailures    int
	lastScriptFailure string
	record            func(event.SkillEvidence)

	progress  bool
	violation string
	finalized bool
	cycle     bool

	// The Act loop's state: the exit reason once decided, whether the run
	// has ended (later calls of the turn are skipped), the current step
	// (model turn) and what the guard needs for each call's evidence.
	parent     context.Context // the caller's context, for budgetExit
	exit       string
	ended      bool
	step       int
	turnStart  time.Time
	turnTokens int64
	turnCalls  int
	reason     string
	noProgress int // steps in a row without progress
	// out is the full output of the call the guard let through, left by
	// sessionTool.Run (calls run one at a time); ran says Run returned.
	out toolOutput
	ran bool

	prior       *runRecord
	reusing     bool   // the run reuses an identical earlier run's outputs
	hash        string // the skill's content hash, computed once
	scriptMemos map[string]scriptMemo
	// baseline holds the hashes of files already in build/ at the start,
	// so only files a script creates or changes become artifacts.
	baseline map[string]string
}

func newSession(rt *Runtime, sk *Skill, in Input) (*session, error) {
	s := &session{
		rt: rt, sk: sk, in: in, budgets: in.Budgets.withDefaults(), start: rt.cfg.Now(),
		readCache: map[string]string{}, injected: map[string]string{}, memo: map[string]string{},
		repeats: map[string]int{}, blackboard: map[string]json.RawMessage{}, artifacts: map[string]*Artifact{},
		versions: map[string]int{}, missing: map[string]bool{},
	}
	s.metrics.Temperature = 0
	s.metrics.Seed = rt.cfg.Seed
	s.metrics.Model = rt.cfg.ModelName
	build := in.BuildDir
	if build == "" {
		build = filepath.Join(sk.Root, "build")
	}
	build, err := filepath.Abs(build)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(build); err == nil && (fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir()) {
		e := agenterr.New(agenterr.CodePathEscape, agenterr.LayerSkill, false, "build directory %s is a symlink or a file", build)
		e.Hint = "remove it; capstan creates the build directory"
		return nil, e
	}
	if err := os.MkdirAll(build, 0o755); err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSkill, false, "create %s", build)
	}
	if r, err := filepath.EvalSymlinks(build); err == nil {
		build = r
	}
	s.build = build
	for _, e := range in.Expected {
		if e.Path == "" || filepath.IsAbs(e.Path) || strings.HasPrefix(filepath.Clean(e.Path), "..") {
			err := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, false, "expected output %q must be a path inside the build directory", e.Path)
			err.Hint = "give paths relative to build/, e.g. --expect report.json"
			return nil, err
		}
	}
	s.record = func(ev event.SkillEvidence) {
		s.evidence = append(s.evidence, ev)
		rt.cfg.Events.Emit(ev)
	}
	s.prior = loadRecord(build)
	s.baseline = map[string]string{}
	_ = filepath.WalkDir(build, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		if b, err := readRegular(p); err == nil {
			rel, _ := filepath.Rel(build, p)
			s.baseline[filepath.ToSlash(rel)] = fileStamp(p, b)
		}
		return nil
	})
	return s, nil
}

func (s *session) now() time.Time { return s.rt.cfg.Now() }

// skillHash is the skill's content hash, computed once per run (scripts
// cannot change the skill: only build/ is writable).
func (s *session) skillHash() string {
	if s.hash == "" {
		s.hash = s.sk.Hash()
	}
	return s.hash
}

// validate checks every expected output. Unless the run is reusing an
// identical earlier run's outputs, an output must also have been produced
// (written, expanded or changed by a script) by this run: a leftover from
// an earlier, different run does not count.
func (s *session) validate() Validation {
	v := Validation{OK: true, Outputs: []OutputCheck{}}
	for _, e := range s.in.Expected {
		oc := checkOutput(s.rt.schemas, s.sk.Root, s.build, e)
		if oc.Completeness && !s.reusing {
			if full, err := s.resolveBuild(e.Path); err == nil {
				rel, _ := filepath.Rel(s.build, full)
				if s.artifacts[filepath.ToSlash(rel)] == nil {
					oc.Completeness = false
					oc.Errors = append([]string{"stale: build/" + e.Path + " exists from an earlier run but this run did not produce it"}, oc.Errors...)
				}
			}
		}
		if !oc.OK() {
			v.OK = false
		}
		v.Outputs = append(v.Outputs, oc)
	}
	return v
}

func (s *session) artifactList() []Artifact {
	out := make([]Artifact, 0, len(s.artifacts))
	for _, a := range s.artifacts {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// systemPrompt is the L1 disclosure plus the rules of the game.
func (s *session) systemPrompt() string {
	var b strings.Builder
	b.WriteString("You are the Act engine for a single Skill. You choose the order of actions; the runtime provides tools, guards and validation.\n")
	b.WriteString("L1 (always): the skill's name and description below. When relevant, load SKILL.md once with readSkillMd (L2).\n")
	b.WriteString("L3 (on demand): read referenced files with readRef/readFile and run scripts with runScript; scripts are run, not read — you get their JSON output.\n")
	b.WriteString("Write outputs only under build/ with writeArtifact or templateExpand. The run ends by itself as soon as every expected output exists and validates; call finalize when you believe it does.\n")
	b.WriteString("Every tool answers JSON with \"ok\". A failed action is remembered: repeating it with the same inputs is refused. Scripts get one retry after a failure (change the parameters or use another script). Missing files: generate the content yourself once, otherwise finalize and report.\n\n")
	fmt.Fprintf(&b, "<skill>\n<name>%s</name>\n<description>%s</description>\n<id>%s</id>\n</skill>\n",
		html.EscapeString(s.sk.Name), html.EscapeString(s.sk.Description), html.EscapeString(s.sk.ID))
	return b.String()
}

// userPrompt states goal, constraints, inputs, expected outputs, budgets.
func (s *session) userPrompt() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\n", s.in.Goal)
	if len(s.in.Constraints) > 0 {
		b.WriteString("Constraints:\n")
		for _, c := range s.in.Constraints {
			fmt.Fprintf(&b, "- %s\n", c)
		}
	}
	if len(s.in.Inputs) > 0 {
		in, _ := json.Marshal(s.in.Inputs)
		fmt.Fprintf(&b, "Inputs (JSON): %s\n", in)
	}
	if len(s.in.Expected) > 0 {
		b.WriteString("Expected outputs (under build/):\n")
		for _, e := range s.in.Expected {
			fmt.Fprintf(&b, "- %s", e.Path)
			if e.Schema != "" {
				fmt.Fprintf(&b, " (must validate against %s)", e.Schema)
			}
			b.WriteString("\n")
		}
	}
	bu := s.budgets
	fmt.Fprintf(&b, "Budgets: %d tool calls, %d ms, %d tokens, scripts %d s each, %d MB of writes.\n",
		bu.MaxToolCalls, bu.TimeBudgetMs, bu.TokenBudget, bu.ScriptTimeoutS, bu.DiskWriteLimitMB)
	return b.String()
}

// reflectNote is the Micro-Reflect prompt: what is still missing and what
// is left, asking for a different approach.
func (s *session) reflectNote() string {
	var missing []string
	for _, oc := range s.validate().Outputs {
		if !oc.OK() {
			missing = append(missing, oc.Path+": "+firstOf(oc.Errors))
		}
	}
	r := s.remaining()
	note := fmt.Sprintf("No progress in the last two steps. Re-plan once with a different action. Remaining: %d tool calls, %d tokens.", r.MaxToolCalls, r.TokenBudget)
	if len(missing) > 0 {
		note += " Still unmet: " + strings.Join(missing, "; ") + "."
	}
	return note
}

// apply runs one tool call with the AttemptMemo and cycle guards.
func (s *session) apply(ctx context.Context, t *actTool, input json.RawMessage) toolOutput {
	key := digest(t.spec.Name, input)
	if t.state != nil {
		key += ":" + t.state(s, input)
	}
	if prev, ok := s.memo[key]; ok {
		s.metrics.MemoRefusals++
		s.repeats[key]++
		if s.repeats[key] >= 3 {
			s.cycle = true
		}
		e := agenterr.New(agenterr.CodeSkillRepeatedFailure, agenterr.LayerSkill, true,
			"refused: this exact action already failed (%s)", prev)
		e.Hint = "change the inputs or choose another action"
		out := failure(e)
		out.cached, out.refused = true, true
		return out
	}
	out := t.run(s, ctx, input)
	if out.isError {
		s.memo[key] = out.errText
	} else if !out.changed {
		s.repeats[key]++
		if s.repeats[key] >= 3 {
			s.cycle = true
		}
	}
	if out.changed {
		s.progress = true
	}
	return out
}
