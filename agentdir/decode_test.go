package agentdir

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/schema"
)

// decode takes go-json-experiment's decoder for a file that decodes
// without an error and encoding/json for every other; the tests here hold
// decode to what encoding/json alone (decodeStd) gives: the same value and
// the same error, field by field.

// sameDecode fails t when decode and decodeStd disagree on raw as the
// configuration file kind (AgentFile or DefaultRegistryFile).
func sameDecode(t testing.TB, kind string, raw []byte) {
	t.Helper()
	switch kind {
	case AgentFile:
		sameDecodeAs[Definition](t, kind, raw)
	default:
		sameDecodeAs[Registry](t, kind, raw)
	}
}

func sameDecodeAs[T any](t testing.TB, kind string, raw []byte) {
	t.Helper()
	var got, want T
	gotErr := decode(newSource(kind, raw), &got)
	src := newSource(kind, raw)
	wantErr := checkUTF8(src)
	if wantErr == nil {
		wantErr = decodeStd(src, &want)
	}
	if g, w := describeDecodeError(gotErr), describeDecodeError(wantErr); g != w {
		t.Fatalf("%s %q:\ndecode:        %s\nencoding/json: %s", kind, raw, g, w)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("%s %q decodes differently:\ndecode:        %s\nencoding/json: %s", kind, raw, g, w)
	}
}

// describeDecodeError renders every field of a decode error a message or
// a problem shows.
func describeDecodeError(err error) string {
	if err == nil {
		return "<nil>"
	}
	e := agenterr.From(err)
	if e == nil {
		return fmt.Sprintf("%T %v", err, err)
	}
	return fmt.Sprintf("%s %s:%d:%d %s (hint %q) wraps %T %v", e.Code, e.File, e.Line, e.Column, e.Message, e.Hint, e.Err, e.Err)
}

// decodeCases are texts whose decoding differs most between JSON
// decoders: duplicate and case-variant names, integral numbers written as
// fractions, numbers out of range, null for every kind of field, escapes,
// a byte order mark, invalid UTF-8 and broken syntax.
var decodeCases = []string{
	`{}`, `null`, `[]`, `""`, `5`, ``, ` `, `{`, `{"runner":`, `{"runner":{}}x`, `{"runner":{},}`,
	`{"name":"a","name":"b"}`,
	`{"runner":{"model":"a"},"runner":{"maxIterations":3}}`,
	`{"NAME":"a"}`, `{"Name":"a","name":"b"}`, `{"name":"a","NAME":"b"}`, `{"ruNNer":{"MODEL":"x"}}`,
	`{"max_iterations":1}`, `{"runner":{"max_iterations":4,"max-iterations":5}}`,
	`{"runner":{"maxIterations":5.0}}`, `{"runner":{"maxIterations":1e2}}`, `{"runner":{"maxIterations":-0.0}}`,
	`{"runner":{"maxIterations":1e400}}`, `{"runner":{"maxIterations":100000000000000000000000}}`,
	`{"runner":{"maxIterations":9007199254740993.0}}`, `{"runner":{"maxIterations":"5"}}`,
	`{"runner":{"maxIterations":2.5}}`, `{"runner":{"maxIterations":-1}}`,
	`{"runner":null}`, `{"runner":{"model":null,"skills":null,"prompts":null}}`,
	`{"runner":{"skills":[null,"a",1]}}`, `{"runner":{"skills":[]}}`, `{"runner":{"skills":{}}}`,
	`{"name":"\u0041\ud83d\ude00\n"}`, `{"n\u0061me":"x"}`, `{"name":"\ud800"}`, `{"name":"a\u0000b"}`,
	"\xef\xbb\xbf{}", `{"name":"` + "\xff" + `"}`, `{"name":1}`, `{"name":true}`, `{"name":{}}`,
	`{"steps":{"a":{"params":{"x":{ "y" : [1, 2 ] }}}}}`, `{"steps":{"a":null}}`, `{"steps":{"":{}}}`,
	`{"steps":{"a":{"stepId":"a"},"a":{"model":"m"}}}`, `{"steps":[]}`, `{"steps":{"a":{"params":null}}}`,
	`{"entryStep":"a","entryStepMapping":{"x":"y"},"steps":{}}`,
	`{"runner":{"flow":{"intents":{"a":{"target":null}}}}}`,
	`{"runner":{"flow":{"intents":{"a":{"target":"b"}}}}}`,
	`{"integrations":{"github":{"labels":{"completion":{"add":["x"]},"other":"y"}}}}`,
	`{"integrations":{"github":{"labels":{"completion":1}}}}`,
	`{"runner":{"tools":{"allowedTools":["Bash(git:*)"],"options":{"a":{"b":1}}}}}`,
	"{\"name\":\"a\"}\n", "\t{ \"name\" :\r\n \"a\" } ", `{"name":"a"} {}`, `{"name":"a"}]`,
	`{"runner":{"maxIterations":01}}`, `{"runner":{"maxIterations":+1}}`, `{"runner":{"maxIterations":.5}}`,
	`{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
	`{'name':'a'}`, `{"name":"a" /* c */}`, `{name:"a"}`,
}

// TestDecodersAgree holds decode to encoding/json on decodeCases, on the
// examples' files and the base fixtures, and on those files mutated at
// every location by every replacement value (with -short, every tenth
// location; under the race detector, every fourth), each as agent.json
// and as the registry.
func TestDecodersAgree(t *testing.T) {
	for _, c := range decodeCases {
		sameDecode(t, AgentFile, []byte(c))
		sameDecode(t, DefaultRegistryFile, []byte(c))
	}
	n := 0
	for _, files := range exampleFiles(t) {
		for _, raw := range files {
			sameDecode(t, AgentFile, raw)
			sameDecode(t, DefaultRegistryFile, raw)
			orig, err := schema.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			for i, at := range locations(orig, nil, nil) {
				if testing.Short() && i%10 != 0 || i%mutationStride != 0 {
					continue
				}
				for op := range 5 {
					for _, v := range replacements {
						doc := mutate(deepCopy(orig), at, op, v)
						b, err := json.Marshal(doc)
						if err != nil {
							t.Fatal(err)
						}
						sameDecode(t, AgentFile, b)
						sameDecode(t, DefaultRegistryFile, b)
						n++
					}
				}
			}
		}
	}
	t.Logf("%d mutated documents, each decoded both ways as both files", n)
}

// FuzzDecoders holds decode to encoding/json on arbitrary text, seeded
// with decodeCases and the examples' files.
func FuzzDecoders(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	for _, files := range exampleFiles(f) {
		for _, raw := range files {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 1<<16 {
			return
		}
		sameDecode(t, AgentFile, raw)
		sameDecode(t, DefaultRegistryFile, raw)
	})
}
