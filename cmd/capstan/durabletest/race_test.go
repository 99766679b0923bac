//go:build race

package durabletest

const raceEnabled = true
