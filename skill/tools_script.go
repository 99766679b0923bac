package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/sandbox"
)

func (s *session) runScript(ctx context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Path string          `json:"path"`
		Args json.RawMessage `json:"args"`
	}](input)
	if err != nil {
		return failure(err)
	}
	full, rel, err := s.resolveRead(in.Path)
	if err != nil {
		return s.pathErr(err)
	}
	src, err := readRegular(full)
	if err != nil {
		return failure(s.missingErr(rel))
	}
	if s.scriptFailures >= 2 {
		return scriptRetriesUsedUp()
	}
	memoKey := hashBytes(append(append([]byte(rel+"\x00"), src...), canonicalJSON(in.Args)...))
	if m, ok := s.reusableScript(memoKey); ok {
		return s.reusedScript(rel, m)
	}
	if s.rt.cfg.Sandbox == nil {
		e := agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false, "no sandbox is configured, scripts cannot run")
		e.Hint = "run on Linux with user namespaces and Landlock, or produce the output without scripts"
		return failure(e)
	}
	sr, err := s.sandboxScript(ctx, rel, in.Args)
	if err != nil {
		if agenterr.CodeOf(err) == agenterr.CodePathEscape {
			return s.pathErr(err)
		}
		return failure(err)
	}
	s.metrics.ScriptRuns++
	s.diskWritten += max(0, sr.BuildBytes)
	changedFiles := s.syncBuild()
	fields := scriptFields(rel, &sr)
	fields["sandboxed"], fields["duration_ms"], fields["build_files_changed"] = sr.Sandboxed, sr.Duration.Milliseconds(), changedFiles
	if sr.Stderr != "" {
		fields["stderr_lines"] = sr.StderrLines
	}
	if s.diskWritten > int64(s.budgets.DiskWriteLimitMB)<<20 {
		s.violation = fmt.Sprintf("script %s pushed writes to %d bytes, over disk_write_limit_mb=%d", rel, s.diskWritten, s.budgets.DiskWriteLimitMB)
	}
	if sr.Status != sandbox.StatusOK {
		return s.scriptFailed(rel, &sr, fields, changedFiles)
	}
	return s.scriptSucceeded(memoKey, rel, &sr, fields, changedFiles)
}

// scriptRetriesUsedUp refuses a script call after two failed ones: the one
// retry after a failure is spent.
func scriptRetriesUsedUp() toolOutput {
	e := agenterr.New(agenterr.CodeSkillRepeatedFailure, agenterr.LayerSkill, true, "scripts failed twice; the one retry after a script failure is used up")
	e.Hint = "produce the output without scripts, or finalize and report"
	out := failure(e)
	out.refused = true
	return out
}

// reusedScript answers a script call with the memo of an earlier run of the
// same script and arguments that wrote nothing.
func (s *session) reusedScript(rel string, m scriptMemo) toolOutput {
	s.metrics.ScriptReuses++
	res := success(map[string]any{"script": rel, "status": "ok", "output": m.Output, "raw_output": m.RawOutput, "note": strings.TrimSpace(m.Note + " (reused: same script and arguments as an earlier run, which wrote nothing)")})
	res.files, res.cached, res.changed = []string{rel}, true, true
	return res
}

// sandboxScript runs one script in the sandbox, its writes capped at what is
// left of the disk write budget.
func (s *session) sandboxScript(ctx context.Context, rel string, args json.RawMessage) (sandbox.ScriptResult, error) {
	remainingMB := s.budgets.DiskWriteLimitMB - int(s.diskWritten>>20)
	if remainingMB < 1 {
		remainingMB = 1
	}
	return s.rt.cfg.Sandbox.RunScript(ctx, sandbox.ScriptSpec{
		Root: s.sk.Root, Build: s.build, Path: rel, Args: args,
		Timeout: time.Duration(s.budgets.ScriptTimeoutS) * time.Second,
		Limits:  sandbox.Limits{CPUSeconds: s.budgets.ScriptTimeoutS, FileSizeMB: remainingMB},
		// Writes stop at the remaining budget while the script runs.
		WriteLimitMB: remainingMB,
	})
}

// scriptFailed counts a failed script run and tells the model whether it has
// a retry left.
func (s *session) scriptFailed(rel string, sr *sandbox.ScriptResult, fields map[string]any, changedFiles []string) toolOutput {
	s.scriptFailures++
	s.lastScriptFailure = fmt.Sprintf("%s: %s", rel, sr.Reason)
	fields["retry"] = "one retry allowed after the first failure: change the parameters or use another script"
	if s.scriptFailures >= 2 {
		fields["retry"] = "no retries left"
	}
	e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "script %s: %s", rel, sr.Reason)
	out := failure(e)
	fields["ok"] = false
	b, _ := json.Marshal(fields)
	out.content = string(b)
	out.files = append([]string{rel}, changedFiles...)
	out.stderr = sr.Stderr
	return out
}

// scriptSucceeded reports a successful script run; one that wrote nothing is
// remembered so the same call again is answered without running it.
func (s *session) scriptSucceeded(memoKey, rel string, sr *sandbox.ScriptResult, fields map[string]any, changedFiles []string) toolOutput {
	if sr.BuildBytes == 0 && len(changedFiles) == 0 {
		if s.scriptMemos == nil {
			s.scriptMemos = map[string]scriptMemo{}
		}
		s.scriptMemos[memoKey] = scriptMemo{Output: sr.Output, RawOutput: truncate(sr.RawOutput, maxRawOutput), Note: sr.Note}
	}
	res := success(fields)
	res.files = append([]string{rel}, changedFiles...)
	res.stderr = sr.Stderr
	res.changed = true
	if len(changedFiles) > 0 {
		res.diff = "script wrote " + strings.Join(changedFiles, ", ")
	}
	return res
}

// reusableScript finds a remembered side-effect-free result of the same
// script and arguments, from this run or an earlier run of the same skill.
func (s *session) reusableScript(key string) (scriptMemo, bool) {
	if m, ok := s.scriptMemos[key]; ok {
		return m, true
	}
	if s.in.Fresh || s.prior == nil || s.prior.SkillHash != s.skillHash() {
		return scriptMemo{}, false
	}
	m, ok := s.prior.Scripts[key]
	return m, ok
}

// syncBuild registers files a script created or changed under build/ as
// new artifact versions and returns their paths.
func (s *session) syncBuild() []string {
	var changed []string
	_ = filepath.WalkDir(s.build, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != s.build && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || !d.Type().IsRegular() {
			return nil
		}
		b, err := readRegular(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(s.build, p)
		rel = filepath.ToSlash(rel)
		h := hashBytes(b)
		if a := s.artifacts[rel]; a != nil && a.Hash == h {
			return nil
		}
		if a := s.artifacts[rel]; a == nil && s.baseline[rel] == fileStamp(p, b) {
			return nil // untouched since the run started
		}
		s.register(rel, int64(len(b)), h)
		changed = append(changed, "build/"+rel)
		return nil
	})
	return changed
}

// scriptFields is what the model is told about a script run: its status,
// exit code, failure reason, parsed JSON output (or capped raw output), the
// runner's note and capped stderr.
func scriptFields(script string, sr *sandbox.ScriptResult) map[string]any {
	fields := map[string]any{"script": script, "status": sr.Status, "exit_code": sr.ExitCode}
	if sr.Reason != "" {
		fields["reason"] = sr.Reason
	}
	if sr.Output != nil {
		fields["output"] = sr.Output
	}
	if sr.RawOutput != "" {
		fields["raw_output"] = truncate(sr.RawOutput, maxRawOutput)
	}
	if sr.Note != "" {
		fields["note"] = sr.Note
	}
	if sr.Stderr != "" {
		fields["stderr"] = truncate(sr.Stderr, 2000)
	}
	return fields
}
