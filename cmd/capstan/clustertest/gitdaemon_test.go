package clustertest

import (
	"testing"

	"github.com/capstan-dev/capstan/internal/clitest"
)

func serveGit(t testing.TB, base string) string { return clitest.ServeGit(t, base) }
