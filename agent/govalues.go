package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"reflect"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
)

// GoValuesVersion is the definition version of an agent built from Go
// values that sets none: agentdir.DefaultVersion, as for a folder's
// agent.json.
const GoValuesVersion = agentdir.DefaultVersion

// goStepPromptC3 is the C3 coordinate of a step prompt given as Go text
// (Prompts.Steps) whose step names no C2 and C3.
const goStepPromptC3 = "main"

// goDefaults fills what only Go values can leave out, for an agent built
// from them: the registry's steps when it declares none (one normal step
// per step prompt of p), and the prompt coordinates C2 and C3 of each step
// that names neither and has a prompt in p (C2 = the step id when it is a
// file name, C3 = "main"). What a folder may leave out too (the version,
// agentId, the entry step of a one-step registry) agentdir.ApplyDefaults
// fills for both. reg is the caller's copy; its Steps map is copied before
// it is changed.
func goDefaults(reg *agentdir.Registry, p Prompts) {
	prompted := map[string]bool{}
	for id := range p.Steps {
		prompted[id] = true
	}
	for k := range p.Retries {
		prompted[k.Step] = true
	}
	reg.Steps = maps.Clone(reg.Steps)
	if len(reg.Steps) == 0 && len(p.Steps) > 0 {
		// A registry with steps keeps them as they are: a prompt of a
		// step it does not declare is then a mistyped key (place says so).
		reg.Steps = make(map[string]agentdir.Step, len(p.Steps))
		for id := range p.Steps {
			reg.Steps[id] = agentdir.Step{}
		}
	}
	for id, st := range reg.Steps {
		if !prompted[id] || st.C2 != "" || st.C3 != "" {
			continue
		}
		st.C2, st.C3 = goStepC2(id), goStepPromptC3
		reg.Steps[id] = st
	}
}

// goStepC2 is the C2 coordinate of step id's Go prompt: the id itself when
// it is a single safe path segment, else a digest of it.
func goStepC2(id string) string {
	if _, err := agentdir.C3LFile(agentdir.DefaultC1, agentdir.PromptRef{C2: id, C3: goStepPromptC3}); err == nil {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "step-" + hex.EncodeToString(sum[:6])
}

// goLocator turns the problems found in an agent built from Go values into
// problems located at the Go fields that hold the values: agent.json's
// pointers become fields of Config.Definition, the registry's of
// Config.Registry, and a prompt file placed from Prompts the key of its
// prompt. A step without a prompt is told to take one from Prompts; what
// only a folder has (the prompts folder, a prompt file's coordinates of a
// step that has none) is not reported twice.
func goLocator(registryFile string, placed map[string]string) func([]agentdir.Problem) []agentdir.Problem {
	one := goProblem(registryFile, placed)
	return func(ps []agentdir.Problem) []agentdir.Problem {
		out := make([]agentdir.Problem, 0, len(ps))
		for _, p := range ps {
			switch {
			case p.Code == "AC-PROMPTS-DIR-MISSING":
				continue // each step without a prompt says so
			case strings.HasSuffix(p.Code, "-SCHEMA-REQUIRED"):
				// "add \"key\": what it is" → what it is, at the Go field.
				p.Message = "a required field is not set"
				if _, what, ok := strings.Cut(p.Hint, ": "); ok {
					p.Hint = "set it: " + what
				} else {
					p.Hint = "set it"
				}
				if p.Code == "SR-SCHEMA-REQUIRED" && p.Pointer == "/steps" {
					p.Message = "the agent has no steps"
					p.Hint = "give each step its prompt in Config.Prompts.Steps (one step per prompt), or declare the steps in Config.Registry.Steps"
				}
			case p.Code == "AC-MODEL-SCRIPT":
				p.Hint = "put the script in Config.Files at the path the model names, or fix Config.Model"
			case p.Code == "SR-STEP-PROMPT" || p.Code == CodeStepPromptMissing:
				if id, ok := strings.CutPrefix(p.Pointer, "/steps/"); ok && !strings.Contains(id, "/") {
					id = strings.NewReplacer("~1", "/", "~0", "~").Replace(id)
					p.Message = fmt.Sprintf("step %q runs a prompt but has none", id)
					p.Hint = fmt.Sprintf("give it its prompt in Config.Prompts.Steps[%q]", id)
				}
			}
			out = append(out, one(p))
		}
		return out
	}
}

// goProblem locates one problem (see goLocator).
func goProblem(registryFile string, placed map[string]string) func(agentdir.Problem) agentdir.Problem {
	return func(p agentdir.Problem) agentdir.Problem {
		var root string
		var typ reflect.Type
		switch path.Clean(p.File) {
		case agentdir.AgentFile:
			root, typ = "Config.Definition", reflect.TypeFor[agentdir.Definition]()
		case path.Clean(registryFile):
			root, typ = "Config.Registry", reflect.TypeFor[agentdir.Registry]()
		default:
			if name, ok := placed[path.Clean(p.File)]; ok {
				p.File, p.Line, p.Column = name, 0, 0
			} else if p.File != "" {
				p.File = "Config.Files " + strconv.Quote(p.File)
			}
			return p
		}
		p.File, p.Pointer, p.Line, p.Column = root+goFieldPath(typ, p.Pointer), "", 0, 0
		return p
	}
}

// goFieldPath spells JSON pointer ptr into a value of type t as the Go
// selectors that reach it (".Runner.Completion.Type", ".Steps[\"a\"]");
// segments that name no field are kept as JSON keys.
func goFieldPath(t reflect.Type, ptr string) string {
	if ptr == "" || ptr == "/" {
		return ""
	}
	var b strings.Builder
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == nil:
			fmt.Fprintf(&b, "[%q]", seg)
		case t.Kind() == reflect.Map:
			fmt.Fprintf(&b, "[%q]", seg)
			t = t.Elem()
		case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
			fmt.Fprintf(&b, "[%s]", seg)
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := jsonField(t, seg)
			if !ok {
				fmt.Fprintf(&b, "[%q]", seg)
				t = nil
				continue
			}
			b.WriteString("." + f.Name)
			t = f.Type
		default:
			fmt.Fprintf(&b, "[%q]", seg)
			t = nil
		}
	}
	return b.String()
}

// jsonField finds the field of struct type t whose JSON name is name,
// looking into embedded structs.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if g, ok := jsonField(ft, name); ok {
					return g, true
				}
			}
			continue
		}
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
