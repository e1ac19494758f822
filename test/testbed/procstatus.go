package testbed

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStatusKiB reads one kB field of /proc/PID/status (VmRSS, VmHWM):
// what the kernel counts of a process the bed started.
func ProcStatusKiB(t TB, pid int, field string) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
