// Command stripschemas writes the copies of capstan's configuration
// schemas that capstan compiles: the schemas of the schemas package
// without their annotations (schema.StripAnnotations), into
// config/embedded. Run it through go generate in the config package:
//
//	go generate ./config
//
// TestStrippedSchemasCurrent fails when a copy is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/schemas"
)

func main() {
	for name, doc := range map[string][]byte{
		"agent.schema.json":          schemas.Agent(),
		"steps_registry.schema.json": schemas.StepsRegistry(),
	} {
		out, err := schema.StripAnnotations(doc)
		if err == nil {
			err = os.WriteFile(filepath.Join("embedded", name), out, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "stripschemas: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
