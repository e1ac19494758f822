package testbed

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMemoryCgroupCharges runs a process in a MemoryCgroup that reads a
// file evicted from the page cache: the cgroup holds the process, is
// charged for the file's pages, and is gone after cleanup.
func TestMemoryCgroupCharges(t *testing.T) {
	var dir string
	t.Run("measure", func(t *testing.T) {
		cg, err := NewMemoryCgroup(t, "warmer-memcg-test")
		if err != nil {
			t.Fatalf("this test bed needs a memory cgroup: %v", err)
		}
		dir = cg.dir()
		const size = 16 << 20
		file := filepath.Join(t.TempDir(), "data")
		data := make([]byte, size)
		_, _ = rand.Read(data)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := EvictFromPageCache(file); err != nil {
			t.Fatal(err)
		}
		before, err := cg.Usage()
		if err != nil {
			t.Fatal(err)
		}
		p := StartProcess(t, "reader", cg.Command("/bin/sh", "-c", `cat "$0" >/dev/null && echo read && exec sleep 60`, file)...)
		Poll(t, 50*time.Millisecond, 30*time.Second, "the file is read", func() error {
			if !strings.Contains(p.Log(5), "read") {
				return fmt.Errorf("not yet: %q", p.Log(5))
			}
			return nil
		})
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(p.Pid())) {
			t.Errorf("pid %d not in the cgroup: %q", p.Pid(), procs)
		}
		after, err := cg.Usage()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("before %+v, after %+v", before, after)
		if after.Usage-before.Usage < size {
			t.Errorf("usage grew by %d bytes, want at least the %d read", after.Usage-before.Usage, size)
		}
		if after.WorkingSet != after.Usage-after.InactiveFile || after.WorkingSet > after.Usage {
			t.Errorf("working set %d is not usage %d less inactive file %d", after.WorkingSet, after.Usage, after.InactiveFile)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there after cleanup: %v", dir, err)
	}
}
