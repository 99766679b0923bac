package skill

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	jschema "github.com/capstan-dev/capstan/schema"
)

func TestActSchemaFailureIsUnmet(t *testing.T) {
	sk := exampleSkill(t)
	bad := strings.Replace(reportJSON, `"total":4`, `"total":"four"`, 1)
	m := &playModel{turns: []playTurn{
		{text: "Write.", calls: [][2]string{call("writeArtifact", `{"path":"report.json","json":`+bad+`}`)}},
		{text: "Done.", calls: [][2]string{call("finalize", `{}`)}},
	}}
	res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed || res.Validation.OK {
		t.Fatalf("invalid report accepted: %+v", res.Validation)
	}
	oc := res.Validation.Outputs[0]
	if !oc.Completeness || oc.Compliance || !strings.Contains(strings.Join(oc.Errors, " "), "/total") {
		t.Errorf("%+v", oc)
	}
	if len(res.Unmet) == 0 || res.Unmet[0].Kind != "invalid_output" || res.Unmet[0].Proposal == "" {
		t.Errorf("unmet %+v", res.Unmet)
	}
	// finalize told the model what is wrong.
	if !strings.Contains(m.seen[2], agenterr.CodeSkillValidation) {
		t.Errorf("finalize answer: %s", m.seen[2])
	}
}

func TestActSchemaRefCannotLeaveSkill(t *testing.T) {
	sk := exampleSkill(t)
	outside := filepath.Join(t.TempDir(), "outside.schema.json")
	os.WriteFile(outside, []byte(`{"type":"object"}`), 0o644)
	rel, _ := filepath.Rel(filepath.Join(sk.Root, "schemas"), outside)
	writeTree(t, sk.Root, map[string]string{
		"schemas/evil.schema.json":  `{"$ref": "file://` + outside + `"}`,
		"schemas/evil2.schema.json": `{"$ref": "` + filepath.ToSlash(rel) + `"}`,
		"schemas/web.schema.json":   `{"$ref": "http://127.0.0.1:1/x.json"}`,
	})
	for _, name := range []string{"evil", "evil2", "web"} {
		errs := validateAgainstSchema(jschema.NewCache(0), sk.Root, "schemas/"+name+".schema.json", "x.json", []byte(`{}`))
		if len(errs) == 0 || !strings.HasPrefix(errs[0], "schema:") {
			t.Errorf("%s: %v", name, errs)
		}
	}
	if errs := validateAgainstSchema(jschema.NewCache(0), sk.Root, "../../etc/passwd", "x.json", []byte(`{}`)); len(errs) == 0 {
		t.Error("schema path escape accepted")
	}
}

// A skill's schema may refer to another schema file of the skill by a
// relative reference.
func TestActSchemaRefInsideSkill(t *testing.T) {
	sk := exampleSkill(t)
	writeTree(t, sk.Root, map[string]string{
		"schemas/item.schema.json":  `{"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}`,
		"schemas/order.schema.json": `{"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "item.schema.json"}}}}`,
	})
	if errs := validateAgainstSchema(jschema.NewCache(0), sk.Root, "schemas/order.schema.json", "x.json", []byte(`{"items": [{"id": 1}]}`)); len(errs) != 0 {
		t.Fatalf("valid document rejected: %v", errs)
	}
	errs := validateAgainstSchema(jschema.NewCache(0), sk.Root, "schemas/order.schema.json", "x.json", []byte(`{"items": [{"id": "one"}, {}]}`))
	if len(errs) != 2 || !strings.Contains(strings.Join(errs, "\n"), "/items/0/id") || !strings.Contains(strings.Join(errs, "\n"), `missing required property "id"`) {
		t.Fatalf("errors %q", errs)
	}
}

// The runtime keeps compiled schemas, but by content: a schema file (or a
// file it refers to) rewritten between two checks is read and compiled
// again, so a rewrite cannot leave the old verdict in force.
func TestActSchemaChangeIsReread(t *testing.T) {
	sk := exampleSkill(t)
	writeTree(t, sk.Root, map[string]string{
		"schemas/id.schema.json":    `{"type": "integer"}`,
		"schemas/order.schema.json": `{"type": "object", "properties": {"id": {"$ref": "id.schema.json"}}}`,
	})
	schemas := jschema.NewCache(0)
	check := func(doc string) []string {
		return validateAgainstSchema(schemas, sk.Root, "schemas/order.schema.json", "x.json", []byte(doc))
	}
	if errs := check(`{"id": 1}`); len(errs) != 0 {
		t.Fatalf("valid document rejected: %v", errs)
	}
	writeTree(t, sk.Root, map[string]string{"schemas/order.schema.json": `{"type": "object", "required": ["name"], "properties": {"id": {"$ref": "id.schema.json"}}}`})
	if errs := check(`{"id": 1}`); len(errs) != 1 || !strings.Contains(errs[0], `"name"`) {
		t.Fatalf("the rewritten schema file is not applied: %v", errs)
	}
	writeTree(t, sk.Root, map[string]string{"schemas/id.schema.json": `{"type": "string"}`})
	if errs := check(`{"id": 1, "name": "n"}`); len(errs) != 1 || !strings.Contains(errs[0], "/id") {
		t.Fatalf("the rewritten referenced file is not applied: %v", errs)
	}
}
