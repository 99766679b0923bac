package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// member is one name/value pair of a JSON object, in the order the file
// writes it. Order matters in a workflow file: the first label of
// labelMapping that names a phase is the label a transition adds, and
// labels are synchronised in the order they are declared.
type member struct {
	Name  string
	Value json.RawMessage
}

// members decodes raw as a JSON object and returns its members in file
// order. It fails when raw is not an object.
func members(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not an object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{Name: name, Value: v})
	}
	return out, nil
}

// jsonKind names the JSON type of raw for messages.
func jsonKind(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
