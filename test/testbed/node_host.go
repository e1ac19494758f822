package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// What a real node changes on the host, and how the test bed undoes it.
// Each change is told to the guard before it is made, so that it is undone
// even when the test binary dies, and undone again by t.Cleanup in the
// ordinary case; undoing twice is harmless.

// nodeLock is the file whose lock lets one test binary at a time run real
// nodes on this machine: the kubelet changes host-wide sysctls, and a second
// node must not save them while the first has them changed.
const nodeLock = "/tmp/warmer-testbed-node.lock"

// KubeletSysctls are the host settings the kubelet sets when it starts
// (its "kernel tunables"), as paths below /proc/sys.
var KubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// ReadSysctls returns the current values of the given /proc/sys paths.
func ReadSysctls(keys []string) (map[string]string, error) {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, err
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out, nil
}

// saveSysctls records the kubelet's sysctls and writes them back at cleanup.
func saveSysctls(t TB) {
	t.Helper()
	saved, err := ReadSysctls(KubeletSysctls)
	if err != nil {
		t.Fatalf("reading the host's sysctls: %v", err)
	}
	for _, k := range KubeletSysctls {
		hostcheck.GuardHost("sysctl", k, saved[k])
	}
	t.Cleanup(func() {
		if err := writeSysctls(saved); err != nil {
			t.Logf("restoring the kubelet's sysctls: %v", err)
		}
	})
}

// writeSysctls writes values to their /proc/sys paths, each whatever the
// others do.
func writeSysctls(values map[string]string) error {
	var errs []error
	for k, v := range values {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// addNodeAddress gives the node an address of its own on the loopback
// device and removes it at cleanup. The kubelet refuses a loopback node IP,
// and the API server must reach the kubelet at the node's address; an
// address from the benchmarking range (198.18.0.0/15) on lo keeps that
// traffic on this machine without the kubelet listening on a real
// interface.
func addNodeAddress(t TB) string {
	t.Helper()
	taken := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				taken[ipn.IP.String()] = true
			}
		}
	}
	var ip string
	for ip == "" || taken[ip] {
		ip = fmt.Sprintf("198.18.%d.%d", rand.IntN(256), 1+rand.IntN(254))
	}
	cidr := ip + "/32"
	hostcheck.GuardHost("addr", cidr, "lo")
	if out, err := exec.Command("ip", "addr", "add", cidr, "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("adding %s to lo: %v: %s", cidr, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "addr", "del", cidr, "dev", "lo").CombinedOutput(); err != nil {
			t.Logf("removing %s from lo: %v: %s", cidr, err, out)
		}
	})
	return ip
}

// cgroupHierarchies lists where this machine mounts its cgroup hierarchies
// (one per controller on cgroup v1, one in all on v2).
func cgroupHierarchies() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		_, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(line)
		if !ok || len(f) < 5 {
			continue
		}
		if fs := strings.Fields(post); len(fs) > 0 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, nil
}

// makeCgroupRoot creates the cgroup the kubelet puts every pod below, in
// every hierarchy, and at cleanup kills what still runs there and removes
// it. A cgroup of its own keeps the node's pods apart from the host's and
// makes them easy to find.
func makeCgroupRoot(t TB, name string) {
	t.Helper()
	hs, err := cgroupHierarchies()
	if err != nil || len(hs) == 0 {
		t.Fatalf("finding the cgroup hierarchies: %v", err)
	}
	hostcheck.GuardHost("cgroup", name)
	for _, h := range hs {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("creating cgroup %s: %v", dir, err)
		}
		// A new cpuset cgroup has no CPUs or memory nodes: nothing could
		// join it. Give it its parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				_ = os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
		}
	}
	t.Cleanup(func() {
		if err := removeCgroup(hs, name, 10*time.Second); err != nil {
			t.Logf("removing the node's cgroups: %v", err)
		}
	})
}

// removeCgroup kills every process in cgroup name and below and removes the
// cgroups, deepest first, retrying until the kernel lets go of them.
func removeCgroup(hierarchies []string, name string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var left []string
		for _, h := range hierarchies {
			root := filepath.Join(h, name)
			if _, err := os.Stat(root); err != nil {
				continue
			}
			killCgroupProcs(root)
			dirs := cgroupDirs(root)
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					left = append(left, dirs[i])
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups still busy: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroupDirs lists root and the cgroups below it, parents first.
func cgroupDirs(root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs
}

// killCgroupProcs sends SIGKILL to every process in root and below.
func killCgroupProcs(root string) {
	for _, dir := range cgroupDirs(root) {
		for _, pid := range CgroupProcs(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// CgroupProcs lists the processes directly in a cgroup directory.
func CgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killProcsMentioning kills the processes whose command line holds text:
// containerd's shims, which leave containerd's process group when they
// start, name the containerd socket they serve.
func killProcsMentioning(text string) {
	for _, pid := range ProcsMentioning(text) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// ProcsMentioning lists the processes whose command line holds text, other
// than this one.
func ProcsMentioning(text string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(text)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// containerLogLinks is where the kubelet links every container's log,
// whatever its configured log directory.
const containerLogLinks = "/var/log/containers"

// hostPaths are what a node writes outside its own directories whatever it
// is told: the kubelet's device plugin socket (a fixed path below
// /var/lib/kubelet), its links to container logs, and the lock directory of
// mount(8), which the kubelet runs. Flex volume plugins would go below
// /usr/libexec/kubernetes; the node's components are told otherwise, and
// the path is here should a default slip through.
var hostPaths = []string{"/var/lib/kubelet", containerLogLinks, "/run/mount", "/usr/libexec/kubernetes"}

// guardHostPaths removes at cleanup those of hostPaths that did not exist
// before the node, and returns them. Where one did exist, only what the node
// adds there is removed (its log links).
func guardHostPaths(t TB) []string {
	t.Helper()
	var made []string
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			made = append(made, p)
			hostcheck.GuardDir(p)
		}
	}
	t.Cleanup(func() {
		for _, p := range made {
			unmountBelow(p)
			if err := os.RemoveAll(p); err != nil {
				t.Logf("removing %s: %v", p, err)
			}
		}
	})
	return made
}

// guardLogLinks has the kubelet's links to the node's container logs
// removed at cleanup.
func guardLogLinks(t TB, podLogs string) {
	t.Helper()
	hostcheck.GuardHost("links", containerLogLinks, podLogs)
	t.Cleanup(func() { removeLinksInto(containerLogLinks, podLogs) })
}

// removeLinksInto removes the symbolic links in dir that point below prefix.
func removeLinksInto(dir, prefix string) {
	for _, l := range LinksInto(dir, prefix) {
		_ = os.Remove(l)
	}
}

// LinksInto lists the symbolic links in dir that point below prefix.
func LinksInto(dir, prefix string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, prefix+"/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
