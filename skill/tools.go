package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
)

// Size caps of what tools put into the model's context.
const (
	maxInjectChars   = 20000 // one read (≈ 5k tokens)
	maxListFiles     = 200
	maxGlobFiles     = 10
	maxTemplateBytes = 1 << 20
	maxRawOutput     = 4000
)

// toolOutput is one tool call's outcome plus what the runtime records.
type toolOutput struct {
	content string
	isError bool
	errText string
	diff    string
	files   []string
	level   string // "L2" / "L3" when content was disclosed
	cached  bool
	refused bool   // the runtime refused the call without running it (AttemptMemo, retry budget)
	changed bool   // the call made progress (new content, new artifact, new value)
	stderr  string // a script's summarized stderr, for the evidence
}

func success(v map[string]any) toolOutput {
	v["ok"] = true
	b, err := json.Marshal(v)
	if err != nil {
		return failure(agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "encode result"))
	}
	return toolOutput{content: string(b)}
}

func failure(err error) toolOutput {
	e := agenterr.From(err)
	if e == nil {
		e = agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "tool failed")
	}
	msg := e.Message
	if e.Err != nil {
		if msg != "" {
			msg += ": "
		}
		msg += e.Err.Error()
	}
	return toolOutput{content: errorContent(e.Code, msg, e.Hint), isError: true, errText: e.Code + ": " + msg}
}

// actTool is one tool of the Act runtime.
type actTool struct {
	spec tool.Spec
	kind tool.Kind
	run  func(s *session, ctx context.Context, input json.RawMessage) toolOutput
	// state, when set, adds the state the call depends on (file contents)
	// to the AttemptMemo key, so an action that failed may be retried once
	// what it depends on changed.
	state func(s *session, input json.RawMessage) string
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

func decode[T any](input json.RawMessage) (T, error) {
	var v T
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		e := agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSkill, true, "bad tool input")
		e.Hint = "follow the tool's input schema"
		return v, e
	}
	return v, nil
}

// tools returns the tools the model may call in a skill run: read SKILL.md
// and its files, expand templates, validate, run scripts in the sandbox,
// write outputs under build/, summarize, diff, use the blackboard, finalize.
func (s *session) tools() []*actTool {
	return []*actTool{
		{spec: tool.Spec{Name: "readSkillMd", Description: "Load the skill's SKILL.md instructions (L2). Call once; a second call only confirms it is unchanged.", InputSchema: schema(``)}, kind: tool.KindRead, run: (*session).readSkillMd},
		{spec: tool.Spec{Name: "readRef", Description: "Read a file SKILL.md refers to: a relative link (\"forms.md\", \"reference.md#section\"), an explicit path, or a glob (\"references/*.md\"). Scripts are summarized, not shown; run them with runScript.", InputSchema: schema(`"path":{"type":"string"}`, "path")}, kind: tool.KindRead, run: (*session).readRef},
		{spec: tool.Spec{Name: "listFiles", Description: "List the skill's files (and build/ outputs) matching an optional glob such as \"**/*.md\".", InputSchema: schema(`"glob":{"type":"string"}`)}, kind: tool.KindRead, run: (*session).listFiles},
		{spec: tool.Spec{Name: "readFile", Description: "Read one file of the skill or of build/ (text: lines offset..offset+limit; scripts: a summary; binary: metadata).", InputSchema: schema(`"path":{"type":"string"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}`, "path")}, kind: tool.KindRead, run: (*session).readFile},
		{spec: tool.Spec{Name: "templateExpand", Description: "Expand a Go text/template file of the skill with JSON data (default: the run's inputs). With output, write the result to build/<output>.", InputSchema: schema(`"template":{"type":"string"},"data":{},"output":{"type":"string"}`, "template")}, kind: tool.KindEdit, run: (*session).templateExpand, state: (*session).buildState},
		{spec: tool.Spec{Name: "validate", Description: "Validate a build/ file or a JSON object against a JSON Schema (a schema file of the skill, or an inline schema) and/or rules {non_empty, contains, not_contains, matches, json, max_bytes}.", InputSchema: schema(`"schema":{},"rules":{"type":"object"},"path":{"type":"string"},"object":{}`)}, kind: tool.KindRead, run: (*session).validateTool, state: (*session).buildState},
		{spec: tool.Spec{Name: "runScript", Description: "Run a skill script (.sh .py .js) in the sandbox: no network, cwd = skill root, writes only in build/. args: {\"argv\": [...], \"stdin\": ...}; without stdin the args object is piped as JSON. Returns the parsed JSON stdout.", InputSchema: schema(`"path":{"type":"string"},"args":{"type":"object"}`, "path")}, kind: tool.KindExecute, run: (*session).runScript, state: (*session).buildState},
		{spec: tool.Spec{Name: "writeArtifact", Description: "Write a file under build/ (path relative to build/). Give content (text) or json (any value, written pretty-printed). Each write is a new version act.<artifact>@vN.", InputSchema: schema(`"path":{"type":"string"},"content":{"type":"string"},"json":{}`, "path")}, kind: tool.KindEdit, run: (*session).writeArtifact},
		{spec: tool.Spec{Name: "summarize", Description: "Summarize a file (skill or build/) or a text: headings, first sentences, JSON keys.", InputSchema: schema(`"path":{"type":"string"},"text":{"type":"string"},"max_lines":{"type":"integer","minimum":1}`)}, kind: tool.KindRead, run: (*session).summarize},
		{spec: tool.Spec{Name: "diff", Description: "Compare two files (skill or build/) line by line.", InputSchema: schema(`"a":{"type":"string"},"b":{"type":"string"}`, "a", "b")}, kind: tool.KindRead, run: (*session).diffTool},
		{spec: tool.Spec{Name: "blackboardPut", Description: "Store a value on the run's blackboard.", InputSchema: schema(`"key":{"type":"string"},"value":{}`, "key", "value")}, kind: tool.KindRead, run: (*session).bbPut},
		{spec: tool.Spec{Name: "blackboardGet", Description: "Read a value from the run's blackboard (all keys when key is empty).", InputSchema: schema(`"key":{"type":"string"}`)}, kind: tool.KindRead, run: (*session).bbGet},
		{spec: tool.Spec{Name: "finalize", Description: "Finish: the runtime validates every expected output. If something is unmet you get the list and may continue.", InputSchema: schema(`"summary":{"type":"string"}`)}, kind: tool.KindRead, run: (*session).finalize, state: (*session).buildState},
	}
}

// pathErr turns a path error into a tool failure; a PATH_ESCAPE also marks
// the run as violating the sandbox rules.
func (s *session) pathErr(err error) toolOutput {
	if agenterr.CodeOf(err) == agenterr.CodePathEscape {
		s.violation = err.Error()
	}
	return failure(err)
}

// resolveRead resolves a path of the skill, or of the build directory when
// it starts with "build/".
func (s *session) resolveRead(rel string) (string, string, error) {
	rel = strings.TrimPrefix(filepath.ToSlash(strings.TrimSpace(rel)), "./")
	if rest, ok := strings.CutPrefix(rel, "build/"); ok {
		p, err := sandbox.ResolveInside(s.build, rest)
		return p, "build/" + rest, err
	}
	p, err := sandbox.ResolveInside(s.sk.Root, rel)
	return p, rel, err
}

// resolveBuild resolves a path relative to the build directory (a leading
// "build/" is accepted).
func (s *session) resolveBuild(rel string) (string, error) {
	rel = strings.TrimPrefix(filepath.ToSlash(strings.TrimSpace(rel)), "./")
	rel = strings.TrimPrefix(rel, "build/")
	return sandbox.ResolveInside(s.build, rel)
}

func (s *session) isReference(rel string) bool {
	for _, r := range s.sk.References {
		if r.Path == rel || r.Text == rel {
			return true
		}
	}
	return false
}

func (s *session) missingErr(rel string) error {
	if s.isReference(rel) {
		s.missing[rel] = true
		e := agenterr.New(agenterr.CodeSkillMissingReference, agenterr.LayerSkill, true, "SKILL.md refers to %q but the skill does not contain it", rel)
		e.Hint = "generate what it would have provided yourself, once (writeArtifact / templateExpand); otherwise finalize and it is reported as unmet"
		return e
	}
	e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "no file %q in the skill", rel)
	e.Hint = "use listFiles to see the skill's files"
	return e
}

var scriptExts = map[string]bool{".py": true, ".sh": true, ".js": true, ".mjs": true, ".ts": true, ".rb": true, ".pl": true}

// templateSteps bounds the work of one templateExpand call (nodes and
// loop items), so nested ranges stop long before the timeout.
const templateSteps = 1_000_000
