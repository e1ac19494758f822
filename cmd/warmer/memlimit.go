package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
)

// softLimitShare is the share of its container's memory limit a warmer
// process asks the Go runtime to stay under. The runtime then collects
// harder as the heap nears it instead of letting garbage pile up to the
// kernel's limit, where the kernel would kill the process (a tenant
// creating ImageWarms as large as the API admits took the agent within
// 15 MiB of its 128 MiB limit, docs/security.md). The tenth left is for
// what the Go runtime does not count: the executable's pages, thread
// stacks in C.
const softLimitShare = 0.9

// noLimit is the least value cgroup v1 writes for "no limit" (the page
// counter's maximum, rounded to pages: 9223372036854771712 on 4 KiB
// pages); v2 writes "max".
const noLimit = 1 << 62

// limitMemory sets the soft memory limit from the process's cgroup and
// says so once.
func limitMemory() {
	if soft := setSoftMemoryLimit(os.DirFS("/")); soft > 0 {
		ctrl.Log.Info("Go soft memory limit set from the container's memory limit", "bytes", soft, "share", softLimitShare)
	}
}

// setSoftMemoryLimit sets the Go runtime's soft memory limit to
// softLimitShare of the memory limit of the cgroup this process runs in,
// unless GOMEMLIMIT says otherwise (the runtime has read it) or there is
// no limit to go by. It returns the limit set, 0 when none was.
func setSoftMemoryLimit(root fs.FS) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := cgroupMemoryLimit(root)
	if limit <= 0 {
		return 0
	}
	soft := int64(float64(limit) * softLimitShare)
	debug.SetMemoryLimit(soft)
	return soft
}

// cgroupMemoryLimit is the memory limit of the process's cgroup: the
// least limit of its cgroup and of those above it that the process sees
// (a Pod's limit may be set on its own cgroup rather than the
// container's), from the memory controller's cgroup v1 hierarchy, or the
// unified v2 one. root is the filesystem's root; 0 when no limit is
// found.
func cgroupMemoryLimit(root fs.FS) int64 {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return 0
	}
	var v1, v2 string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		switch {
		case len(parts) != 3:
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case hasController(parts[1], "memory"):
			v1 = parts[2]
		}
	}
	if v1 != "" {
		return leastLimit(root, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	}
	if v2 != "" {
		return leastLimit(root, "sys/fs/cgroup", v2, "memory.max")
	}
	return 0
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// leastLimit walks from the cgroup at mount+cgroup up to the mount's
// root, reading file in each, and returns the least limit met; 0 when
// none is set. A cgroup namespace shows the process's cgroup as the root,
// so the walk stops there.
func leastLimit(root fs.FS, mount, cgroup, file string) int64 {
	var least int64
	for dir := path.Clean("/" + cgroup); ; dir = path.Dir(dir) {
		if n := readLimit(root, path.Join(mount, dir, file)); n > 0 && (least == 0 || n < least) {
			least = n
		}
		if dir == "/" {
			return least
		}
	}
}

// readLimit reads one limit file: 0 for "max", the v1 no-limit value,
// or a file that is not there (the root cgroup has none).
func readLimit(root fs.FS, name string) int64 {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= noLimit {
		return 0
	}
	return n
}
