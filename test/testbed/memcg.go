package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// MemoryCgroup is a memory cgroup of the test's own, for a process whose
// memory is measured the way the kubelet measures a container's: its
// working set is the cgroup's usage less its inactive file pages, what
// the kubelet's eviction manager and `kubectl top` go by. It sits at the
// top of the memory hierarchy (v1) or of the unified one (v2), as the
// real node's cgroups do, and is removed at cleanup, by the guard if the
// test binary dies first.
type MemoryCgroup struct {
	hierarchy, name string
	v2              bool
}

// MemoryUsage is what a memory cgroup holds, in bytes.
type MemoryUsage struct {
	// Usage is all memory charged to the cgroup: the process's
	// anonymous memory, the page cache it brought in (its executable's
	// pages among them) and kernel memory on its behalf.
	Usage int64
	// InactiveFile is the page cache not used lately, which the kernel
	// reclaims first.
	InactiveFile int64
	// WorkingSet is Usage less InactiveFile (never below zero): the
	// kubelet's container_memory_working_set_bytes.
	WorkingSet int64
}

// NewMemoryCgroup creates a memory cgroup named name (a prefix; the test
// binary's pid is added) and removes it at cleanup. It returns an error,
// rather than failing the test, where this machine allows none (no memory
// controller, not root): the caller says what it measures instead.
func NewMemoryCgroup(t TB, name string) (*MemoryCgroup, error) {
	t.Helper()
	c, err := findMemoryHierarchy()
	if err != nil {
		return nil, err
	}
	c.name = fmt.Sprintf("%s-%d", name, os.Getpid())
	if err := os.Mkdir(c.dir(), 0o755); err != nil {
		return nil, fmt.Errorf("creating memory cgroup: %w", err)
	}
	hostcheck.GuardHost("cgroup", c.name)
	t.Cleanup(func() {
		if err := removeCgroup([]string{c.hierarchy}, c.name, 10*time.Second); err != nil {
			t.Logf("removing memory cgroup (the guard tries again when the test binary ends): %v", err)
		}
	})
	return c, nil
}

// findMemoryHierarchy finds where the memory controller is mounted: its
// own cgroup v1 hierarchy, or else the unified v2 one if it offers memory.
func findMemoryHierarchy() (*MemoryCgroup, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var unified string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, super := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(super) < 3 {
			continue
		}
		switch {
		case super[0] == "cgroup" && hasOption(super[2], "memory"):
			return &MemoryCgroup{hierarchy: unescapeMount(fields[4])}, nil
		case super[0] == "cgroup2":
			unified = unescapeMount(fields[4])
		}
	}
	if unified != "" {
		if b, err := os.ReadFile(filepath.Join(unified, "cgroup.subtree_control")); err == nil && hasOption(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", ","), "memory") {
			return &MemoryCgroup{hierarchy: unified, v2: true}, nil
		}
	}
	return nil, errors.New("no memory cgroup controller mounted for new cgroups")
}

func hasOption(opts, name string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == name {
			return true
		}
	}
	return false
}

func (c *MemoryCgroup) dir() string { return filepath.Join(c.hierarchy, c.name) }

// Command wraps argv so that the process joins the cgroup before it
// becomes argv (a shell writes its pid into the cgroup, then execs): all
// its memory, from its first page, is charged there, and its pid is the
// shell's.
func (c *MemoryCgroup) Command(argv ...string) []string {
	return append([]string{"/bin/sh", "-c", `echo $$ >"$0" && exec "$@"`, filepath.Join(c.dir(), "cgroup.procs")}, argv...)
}

// SetLimit sets the cgroup's memory limit, as the kubelet sets a
// container's from its resources.limits.memory.
func (c *MemoryCgroup) SetLimit(bytes int64) error {
	file := "memory.limit_in_bytes"
	if c.v2 {
		file = "memory.max"
	}
	return os.WriteFile(filepath.Join(c.dir(), file), []byte(strconv.FormatInt(bytes, 10)), 0o644)
}

// Usage reads the cgroup's memory figures as the kubelet (cAdvisor) does:
// memory.usage_in_bytes and total_inactive_file on v1, memory.current and
// inactive_file on v2.
func (c *MemoryCgroup) Usage() (MemoryUsage, error) {
	usageFile, statKey := "memory.usage_in_bytes", "total_inactive_file"
	if c.v2 {
		usageFile, statKey = "memory.current", "inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(c.dir(), usageFile))
	if err != nil {
		return MemoryUsage{}, err
	}
	var u MemoryUsage
	if u.Usage, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return MemoryUsage{}, fmt.Errorf("%s: %w", usageFile, err)
	}
	stat, err := os.ReadFile(filepath.Join(c.dir(), "memory.stat"))
	if err != nil {
		return MemoryUsage{}, err
	}
	for line := range strings.SplitSeq(string(stat), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == statKey {
			u.InactiveFile, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	u.WorkingSet = max(u.Usage-u.InactiveFile, 0)
	return u, nil
}

// EvictFromPageCache drops path's pages from the page cache (they must be
// clean: a finished build's are once synced), so that the next process
// to read it, such as a binary started in a MemoryCgroup, brings them in
// and is charged for them, as a container reading its image's files for
// the first time is.
func EvictFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
