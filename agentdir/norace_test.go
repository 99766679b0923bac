//go:build !race

package agentdir

// mutationStride is how many locations the mutation tests step over at a
// time: every location, without the race detector (see race_test.go).
const mutationStride = 1
