package hostcheck

import (
	"fmt"
	"os"
	"strings"
)

// raceMarker opens each report the race detector writes to a program's
// standard error; raceRule closes it.
const (
	raceMarker = "WARNING: DATA RACE"
	raceRule   = "=================="
)

// maxRaceReports bounds how many reports a failure message repeats: the
// first few locate the race, the rest are usually the same one again.
const maxRaceReports = 3

// raceReports returns the race detector's reports in a log, each from its
// marker to its closing rule, and how many there were in all.
func raceReports(log string) (reports []string, total int) {
	lines := strings.Split(log, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.Contains(lines[i], raceMarker) {
			continue
		}
		total++
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != raceRule {
			end++
		}
		if len(reports) < maxRaceReports {
			reports = append(reports, strings.Join(lines[i:end], "\n"))
		}
		i = end
	}
	return reports, total
}

// CheckRaces fails the test when the log of the process name holds a race
// report, and prints the first reports. It runs at cleanup, after the
// process stopped, so that it sees everything the process wrote.
func CheckRaces(t TB, name, logPath string) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Logf("%s: reading the log for race reports: %v", name, err)
		return
	}
	reports, total := raceReports(string(b))
	if total == 0 {
		return
	}
	msg := fmt.Sprintf("%s: the race detector found %d data race(s); the first %d:\n%s",
		name, total, len(reports), strings.Join(reports, "\n"+raceRule+"\n"))
	// Errorf lets the remaining cleanups run as usual; a TB without it
	// (the sandbox) stops here.
	if e, ok := t.(interface{ Errorf(string, ...any) }); ok {
		e.Errorf("%s", msg)
		return
	}
	t.Fatal(msg)
}
