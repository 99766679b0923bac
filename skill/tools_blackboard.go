package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
)

// blackboardSet stores a value and reports whether it changed.
func (s *session) blackboardSet(key string, v json.RawMessage) bool {
	c := canonicalJSON(v)
	if prev, ok := s.blackboard[key]; ok && bytes.Equal(prev, c) {
		return false
	}
	s.blackboard[key] = c
	return true
}

func (s *session) bbPut(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}](input)
	if err != nil {
		return failure(err)
	}
	if in.Key == "" || len(in.Value) == 0 {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "key and value are required"))
	}
	if len(in.Value) > 64<<10 {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "value larger than 64 KiB; write an artifact instead"))
	}
	changed := s.blackboardSet("user:"+in.Key, in.Value)
	res := success(map[string]any{"key": in.Key, "changed": changed})
	res.changed = changed
	return res
}

func (s *session) bbGet(_ context.Context, input json.RawMessage) toolOutput {
	in, err := decode[struct {
		Key string `json:"key"`
	}](input)
	if err != nil {
		return failure(err)
	}
	if in.Key == "" {
		keys := []string{}
		for k := range s.blackboard {
			if rest, ok := strings.CutPrefix(k, "user:"); ok {
				keys = append(keys, rest)
			}
		}
		sort.Strings(keys)
		return success(map[string]any{"keys": keys})
	}
	v, ok := s.blackboard["user:"+in.Key]
	if !ok {
		return failure(agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "no blackboard key %q", in.Key))
	}
	return success(map[string]any{"key": in.Key, "value": v})
}

func (s *session) finalize(_ context.Context, _ json.RawMessage) toolOutput {
	val := s.validate()
	if val.OK {
		s.finalized = true
		return success(map[string]any{"validation": val})
	}
	var unmet []string
	for _, oc := range val.Outputs {
		if !oc.OK() {
			unmet = append(unmet, oc.Path+": "+strings.Join(oc.Errors, "; "))
		}
	}
	e := agenterr.New(agenterr.CodeSkillValidation, agenterr.LayerSkill, true, "not done: %s", strings.Join(unmet, " | "))
	e.Hint = "fix the listed outputs, then finalize again"
	out := failure(e)
	return out
}

// buildState is the AttemptMemo state of calls that depend on build/ and
// on the skill's files: the versions of every artifact.
func (s *session) buildState(json.RawMessage) string {
	var parts []string
	for _, a := range s.artifactList() {
		parts = append(parts, a.Path+"="+a.Hash)
	}
	return hashBytes([]byte(strings.Join(parts, ";")))
}
