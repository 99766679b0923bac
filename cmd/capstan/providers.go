package main

// Model providers compiled into the capstan binary. Each registers itself
// with package llm when imported.
import (
	_ "github.com/capstan-dev/capstan/llm/anthropic"
	_ "github.com/capstan-dev/capstan/llm/claudecode"
	_ "github.com/capstan-dev/capstan/llm/openai"
	_ "github.com/capstan-dev/capstan/llm/script"
)
