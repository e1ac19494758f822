package testbed

import (
	"os"
	"path/filepath"
	"time"
)

// What a node's operator or its hardware does to a running node: the
// kubelet restarted, containerd restarted, a power cycle. The processes
// started again are stopped by the cleanups StartNode registered (they stop
// whichever kubelet and containerd run then), and by the guard, which knows
// each new process group, if the test binary dies.

// StopKubelet stops the kubelet as systemd does (SIGTERM, SIGKILL after
// 10 s). Its pods keep running: a kubelet that stops leaves them be.
func (n *RealNode) StopKubelet() { n.kubelet.stop(10 * time.Second) }

// StartKubelet starts the kubelet again with the flags and configuration
// it first had, and returns once it runs; the Node's readiness follows
// within seconds, which the caller waits for as it needs.
func (n *RealNode) StartKubelet(t TB) {
	t.Helper()
	argv := append([]string{filepath.Join(n.assets, "kubelet")}, n.kubeletArgs...)
	p, err := startProcess("kubelet", filepath.Join(n.dir, "kubelet.log"), nil, argv...)
	if err != nil {
		t.Fatal(err)
	}
	n.kubelet = p
}

// ReconfigureKubelet restarts the kubelet with the top-level fields of
// extra set over the configuration it started with, as an operator who
// edits the kubelet's configuration and restarts it; nil restores the
// configuration it started with.
func (n *RealNode) ReconfigureKubelet(t TB, extra map[string]any) {
	t.Helper()
	b, err := mergeKubeletConfig(n.kubeletConfig, extra)
	if err != nil {
		t.Fatalf("the kubelet's configuration: %v", err)
	}
	n.StopKubelet()
	if err := os.WriteFile(n.kubeletConfigPath(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	n.StartKubelet(t)
}

// CollectingKubeletConfig is kubelet configuration (for NodeOptions or
// ReconfigureKubelet) under which the kubelet deletes every unused,
// unpinned image within about 10 s. Its periodic image garbage collection
// runs only every 5 minutes (a constant, not a setting); its eviction
// manager, every 10 s under an imagefs or nodefs threshold the node is
// below, reclaims space with the same collector, which skips pinned
// images, and then evicts the pods it may. The thresholds here are above
// what any disk has free, and imageMinimumGCAge lets it take images a
// second old (0 would mean its default, 2 minutes).
func CollectingKubeletConfig() map[string]any {
	return map[string]any{
		"imageMinimumGCAge": "1s",
		"evictionHard": map[string]any{
			"memory.available":  "50Mi",
			"nodefs.available":  "99.9%",
			"nodefs.inodesFree": "1%",
			"imagefs.available": "99.9%",
		},
	}
}

// PowerCycle does to the node what a reboot does: the kubelet and
// containerd die (SIGKILL), and with them every shim and container; the
// mounts go (the containers' root filesystems and shared memory below
// containerd's state, the pods' volumes below the kubelet's directory);
// containerd's state directory, a tmpfs (/run/containerd) on a node, is
// emptied. What a node keeps on disk stays: containerd's root (images,
// snapshots, its records of sandboxes and containers) and the kubelet's
// directory. After down, containerd and then the kubelet start again, and
// the kubelet runs the node's pods anew. It returns when both run.
func (n *RealNode) PowerCycle(t TB, down time.Duration) {
	t.Helper()
	n.kubelet.kill()
	n.Containerd.Kill()
	killProcsMentioning(n.Containerd.Socket)
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatalf("finding the cgroup hierarchies: %v", err)
	}
	for _, h := range hs {
		killCgroupProcs(filepath.Join(h, n.cgroup))
	}
	unmountBelow(n.Containerd.StateDir())
	unmountBelow(filepath.Join(n.dir, "kubelet"))
	entries, err := os.ReadDir(n.Containerd.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(n.Containerd.StateDir(), e.Name())); err != nil {
			t.Fatalf("emptying containerd's state directory: %v", err)
		}
	}
	time.Sleep(down)
	n.Containerd.start(t)
	n.StartKubelet(t)
}
