//go:build !race

package hostcheck

// RaceEnabled says this test binary runs under the race detector; see
// race.go.
const RaceEnabled = false
