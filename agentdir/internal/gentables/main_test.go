package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// agentdir/schema_tables.go is what this command writes now (the config
// package's TestTablesCurrent compares the tables themselves).
func TestTablesFileCurrent(t *testing.T) {
	want, err := source()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", outFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("agentdir/schema_tables.go is stale: run go generate ./agentdir")
	}
}
