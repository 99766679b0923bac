// Package eino holds benchmarks only: capstan's agent iteration and tool
// loop turn side by side with cloudwego/eino's agents and with a loop
// written by hand, against instant in-process models (see
// docs/benchmarks.md, "capstan next to eino"). BenchmarkIteration and
// BenchmarkToolTurn compare capstan with eino's react agent built once;
// BenchmarkIterationEinoVariants and BenchmarkToolTurnEinoVariants
// measure the other ways a user writes an eino agent (built per run or
// per iteration, with a callbacks journal, eino's ADK ChatModelAgent and
// Runner, streaming). Folder then holds the capstan side built against
// the capstan of 2026-11-21 (then/build.sh). It is a module of its own so
// that capstan's module does not depend on eino and `go test ./...` at
// the repository's root does not build it; run it from this folder:
//
//	go test -run XXX -bench . -benchtime 200x -cpu 1
//
// When capstan's own go.mod changes, `go mod tidy` here brings this
// module's requirements along.
package eino
