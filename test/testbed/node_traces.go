package testbed

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Traces is what a RealNode puts on the host while it runs, and the host's
// state from before it started, to check that nothing stays once it has
// stopped (LeftBehind).
type Traces struct {
	// Sysctls are the kubelet's sysctls as they were before the node.
	Sysctls map[string]string
	// Dirs hold everything the node's processes write.
	Dirs []string
	// Cgroup is the cgroup the node's pods run below, in every hierarchy.
	Cgroup string
	// IP is the node's address on lo.
	IP string
	// Socket is containerd's socket, which its shims name.
	Socket string
	// Assets is the folder of the node's binaries.
	Assets string
	// Owner is the PID of the test binary that started the node: other
	// binaries' processes also run from Assets.
	Owner int
	// PodLogs is the kubelet's log folder, which it links to from
	// /var/log/containers.
	PodLogs string
	// Created are the host paths the node made outside its directories.
	Created []string
	// IPTables are the host's KUBE- iptables lines before the node;
	// NetNS its named network namespaces.
	IPTables []string
	NetNS    []string
}

// hostBefore records what the host had before a node started.
func hostBefore() Traces {
	sysctls, _ := ReadSysctls(KubeletSysctls)
	return Traces{Sysctls: sysctls, IPTables: kubeIPTables(), NetNS: netnsNames()}
}

// Traces describes what this node put on the host.
func (n *RealNode) Traces() Traces {
	tr := n.before
	tr.Dirs = []string{n.dir, n.Containerd.Dir}
	tr.Cgroup, tr.IP, tr.Socket, tr.Assets, tr.PodLogs = n.cgroup, n.IP, n.Containerd.Socket, n.assets, n.podLogs()
	tr.Owner = os.Getpid()
	return tr
}

// LeftBehind lists what of tr is still on the host: processes, mounts,
// directories, cgroups, the address, links, iptables rules, network
// namespaces, and sysctls that differ from before. Empty means no trace.
func LeftBehind(tr Traces) []string {
	left := leftSysctls(tr)
	left = append(left, leftProcsAndFiles(tr)...)
	return append(left, leftOnHost(tr)...)
}

// leftSysctls lists the kubelet's sysctls that differ from before.
func leftSysctls(tr Traces) []string {
	var left []string
	now, err := ReadSysctls(KubeletSysctls)
	if err != nil {
		left = append(left, err.Error())
	}
	for _, k := range KubeletSysctls {
		if now[k] != tr.Sysctls[k] {
			left = append(left, fmt.Sprintf("sysctl %s=%s (was %s)", k, now[k], tr.Sysctls[k]))
		}
	}
	return left
}

// leftProcsAndFiles lists the node's processes, mounts, directories and
// host paths still there.
func leftProcsAndFiles(tr Traces) []string {
	var left []string
	for _, d := range tr.Dirs {
		if m, _ := mountsBelow(d); len(m) > 0 {
			left = append(left, "mounts "+strings.Join(m, ","))
		}
		if _, err := os.Stat(d); err == nil {
			left = append(left, "dir "+d)
		}
		for _, pid := range ProcsMentioning(d) {
			left = append(left, fmt.Sprintf("process %d (%s)", pid, cmdline(pid)))
		}
	}
	for _, pid := range procsRunningFrom(tr.Assets, tr.Owner) {
		left = append(left, fmt.Sprintf("process %d (%s)", pid, cmdline(pid)))
	}
	for _, p := range tr.Created {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, "path "+p)
		}
	}
	for _, l := range LinksInto(containerLogLinks, tr.PodLogs) {
		left = append(left, "log link "+l)
	}
	return left
}

// leftOnHost lists the node's cgroups, address, iptables rules and network
// namespaces still there.
func leftOnHost(tr Traces) []string {
	var left []string
	if hs, err := cgroupHierarchies(); err == nil && tr.Cgroup != "" {
		for _, h := range hs {
			if _, err := os.Stat(filepath.Join(h, tr.Cgroup)); err == nil {
				left = append(left, "cgroup "+filepath.Join(h, tr.Cgroup))
			}
		}
	}
	if hasAddress(tr.IP) {
		left = append(left, "address "+tr.IP)
	}
	for _, l := range kubeIPTables() {
		if !slices.Contains(tr.IPTables, l) {
			left = append(left, "iptables "+l)
		}
	}
	for _, ns := range netnsNames() {
		if !slices.Contains(tr.NetNS, ns) {
			left = append(left, "netns "+ns)
		}
	}
	return left
}

// procsRunningFrom lists the processes the test binary of PID owner
// started (startedBy) whose executable lies in dir.
func procsRunningFrom(dir string, owner int) []int {
	if dir == "" {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && strings.HasPrefix(exe, dir+"/") && startedBy(pid, owner) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func hasAddress(ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil || ip == "" {
		return false
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.String() == ip {
			return true
		}
	}
	return false
}

// kubeIPTables lists the iptables and ip6tables lines naming a KUBE- chain,
// what a kubelet (or kube-proxy) would add. None when iptables is absent.
func kubeIPTables() []string {
	var out []string
	for _, bin := range []string{"iptables-save", "ip6tables-save"} {
		b, err := exec.Command(bin).Output()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "KUBE-") {
				out = append(out, bin+": "+strings.TrimSpace(counters.ReplaceAllString(l, "")))
			}
		}
	}
	return out
}

// counters are iptables-save's packet and byte counts, which change.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// netnsNames lists the named network namespaces (ip netns).
func netnsNames() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
