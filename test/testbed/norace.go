//go:build !race

package testbed

// raceEnabled says this test binary runs under the race detector; see
// race.go.
const raceEnabled = false
