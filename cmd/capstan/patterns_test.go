package main

import (
	"testing"

	"github.com/capstan-dev/capstan/internal/lazyre"
)

// Every package-level pattern of the packages the binary links is
// compiled on first use (lazyre); compile them all here, so a bad one
// fails the tests instead of the command that first uses it.
func TestEveryPatternCompiles(t *testing.T) {
	if expr, err := lazyre.MustCompileAll(); err != nil {
		t.Fatalf("pattern %s: %v", expr, err)
	}
}
