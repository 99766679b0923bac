// Package handlebars holds benchmarks and a conformance table only:
// capstan's Handlebars renderer (internal/handlebars, which renders retry
// prompts and pipeline prompts) side by side with mailgun/raymond/v2 on
// the retry prompt of a failed test run and on the template features
// capstan and climpt document (see docs/benchmarks.md, "Handlebars: the
// renderer next to raymond", and docs/architecture.md, "One engine of
// each kind"). It is a module of its own so that capstan's module does
// not depend on raymond; run it from this folder:
//
//	go test -run Conformance -v .
//	go test -run XXX -bench . -benchmem
//
// When capstan's own go.mod changes, `go mod tidy` here brings this
// module's requirements along.
package handlebars
