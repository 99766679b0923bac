package main

import (
	"testing"

	"github.com/capstan-dev/capstan/internal/clitest"
)

// fakeKey is an API key in the workers' and the submitter's environment:
// it must never reach a workflow history.
const fakeKey = clitest.FakeKey

// tworker is a `capstan worker` process.
type tworker = clitest.Worker

// startWorker starts `capstan worker` on the Temporal server at addr with
// its work dirs under root, holding fakeKey.
func startWorker(t testing.TB, addr, root string, extra ...string) *tworker {
	return clitest.StartWorker(t, cliCommand, addr, root, extra...)
}

func gitT(t testing.TB, dir string, args ...string) string { return clitest.Git(t, dir, args...) }

func readFileT(t testing.TB, p string) string { return clitest.ReadFile(t, p) }

func serveGit(t testing.TB, base string) string { return clitest.ServeGit(t, base) }
