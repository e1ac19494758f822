package hostcheck

import (
	"strings"
	"testing"
)

// A log shaped like the race detector's output: two reports between log
// lines, each opened by the marker and closed by a rule.
const racyLog = `I0101 started
==================
WARNING: DATA RACE
Write at 0x00c000012345 by goroutine 7:
  main.worker()
      /src/main.go:10 +0x44

Previous read at 0x00c000012345 by goroutine 6:
  main.reader()
      /src/main.go:20 +0x38
==================
I0101 still going
==================
WARNING: DATA RACE
Read at 0x00c000067890 by goroutine 9:
  main.other()
      /src/main.go:30 +0x11
==================
Found 2 data race(s)
`

func TestRaceReports(t *testing.T) {
	reports, total := raceReports(racyLog)
	if total != 2 || len(reports) != 2 {
		t.Fatalf("want 2 reports, got %d of %d: %q", len(reports), total, reports)
	}
	if !strings.Contains(reports[0], "main.worker()") || !strings.Contains(reports[0], "main.reader()") ||
		strings.Contains(reports[0], "still going") {
		t.Errorf("first report is not the first race's text: %q", reports[0])
	}
	if !strings.HasPrefix(reports[1], raceMarker) || !strings.Contains(reports[1], "main.other()") {
		t.Errorf("second report: %q", reports[1])
	}
	if _, total := raceReports("I0101 started\nall fine\n"); total != 0 {
		t.Errorf("a clean log gave %d reports", total)
	}
	many := strings.Repeat(raceMarker+"\nstack\n"+raceRule+"\n", 5)
	if reports, total := raceReports(many); total != 5 || len(reports) != maxRaceReports {
		t.Errorf("five reports: got %d of %d, want %d of 5", len(reports), total, maxRaceReports)
	}
}
