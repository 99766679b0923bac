// Package schemas ships the JSON Schemas (draft 2020-12) of capstan's agent
// files: agent.json and steps_registry.json. agentdir.Validate checks files
// against them; editors use them for autocomplete through the files' "$schema"
// key (AgentURL, StepsRegistryURL).
package schemas

import _ "embed"

//go:embed agent.schema.json
var agentSchema []byte

//go:embed steps_registry.schema.json
var stepsRegistrySchema []byte

// AgentURL is the $id of the agent.json schema; use it as "$schema" in
// agent.json.
const AgentURL = "https://raw.githubusercontent.com/capstan-dev/capstan/main/schemas/agent.schema.json"

// StepsRegistryURL is the $id of the steps_registry.json schema; use it as
// "$schema" in steps_registry.json.
const StepsRegistryURL = "https://raw.githubusercontent.com/capstan-dev/capstan/main/schemas/steps_registry.schema.json"

// Agent returns a copy of the agent.json schema document.
func Agent() []byte { return append([]byte(nil), agentSchema...) }

// StepsRegistry returns a copy of the steps_registry.json schema document.
func StepsRegistry() []byte { return append([]byte(nil), stepsRegistrySchema...) }
