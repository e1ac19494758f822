// Package hostcheck holds what watches the host and checks what the test
// bed's processes leave there, without starting any of them: the guard
// that undoes the test bed's changes to the host if the test binary dies,
// the race detector's reports in a process's log, and secrets leaked into
// what warmer shows.
//
//   - guard.go: the guard, a shell process that outlives the test binary
//     by a moment and kills, unmounts, removes and writes back what it
//     was told of (GuardGroup, UnguardGroup, GuardDir, GuardHost), and
//     holds the lock that lets one test binary at a time run real nodes
//     (GuardLock).
//   - racecheck.go: CheckRaces, which fails a test whose process logged a
//     data race; race.go and norace.go: RaceEnabled, whether this test
//     binary runs under the race detector (so builds warmer with -race).
//     racecheck_test.go checks the reports are found in a log.
//   - leaks.go: the search for a secret in logs, events, statuses and
//     metrics: RandomPassword, LeakForms (the forms a password could leak
//     in), SearchLeaks.
//
// The launchers (package testbed) tell the guard what they start and
// change, and check their processes' logs for races at cleanup; tests call
// the leak search themselves. This package does not import testbed.
package hostcheck

// TB is the part of testing.TB this package uses. A *testing.T satisfies
// it, and so does every testbed.TB.
type TB interface {
	Helper()
	Fatal(args ...any)
	Logf(format string, args ...any)
}
