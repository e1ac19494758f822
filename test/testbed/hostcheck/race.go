//go:build race

package hostcheck

// RaceEnabled says this test binary runs under the race detector, so the
// warmer binary it starts is built with -race too: the agent's and the
// controller's goroutines are then race-checked in every test that runs them.
const RaceEnabled = true
