// Package pipeline runs contract-checked reasoning pipelines: a graph of
// stages over a shared, namespaced context (AgentContext), each stage
// declaring the keys it needs (preconditions) and the keys it promises
// (postconditions) in its Contract. The Manager checks the key flow before
// anything runs, gives each stage an immutable snapshot of what it
// declared, lets it write only what it promised, and records what it
// actually wrote. `capstan pipeline` is its command; package standard
// holds the built-in reasoning agents.
package pipeline
