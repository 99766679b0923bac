//go:build race

package agentdir

// mutationStride is how many locations the mutation tests step over at a
// time. Under the race detector they check every fourth location: they
// run on one goroutine, so the detector has nothing to find in them and
// only multiplies their cost (CI runs them in full without it too).
const mutationStride = 4
