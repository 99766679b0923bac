package schema_test

import (
	"fmt"

	"github.com/capstan-dev/capstan/schema"
)

func ExampleResolver_Resolve() {
	r := schema.NewResolver("testdata/schemas")
	raw, err := r.Resolve("issue.schema.json", "complete.issue")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(raw))
	// Output:
	// {"type":"object","properties":{"stepId":{"type":"string"},"status":{"type":"string","enum":["in_progress","completed"]},"issue":{"type":"object","properties":{"number":{"type":"integer"}},"required":["number"],"additionalProperties":false}},"required":["stepId","status","issue"],"additionalProperties":false}
}

func ExampleValidator_Validate() {
	raw, _ := schema.NewResolver("testdata/schemas").Resolve("issue.schema.json", "complete.issue")
	v, _ := schema.Compile(raw)

	answer := "All done!\n```json\n{\"stepId\": \"complete.issue\", \"status\": \"done\", \"issue\": {}}\n```"
	out, ok := schema.ExtractJSON(answer)
	fmt.Println(ok, string(out))

	for _, p := range schema.Problems(v.Validate(out)) {
		fmt.Println(p)
	}
	// Output:
	// true {"stepId": "complete.issue", "status": "done", "issue": {}}
	// at /issue: missing required property "number"
	// at /status: value "done" must be one of "in_progress", "completed"
}
