// Package testbed starts the real parts warmer's tests run against, as
// processes on loopback: a kube-apiserver with etcd (through envtest), OCI
// registries (Debian's docker-registry) loaded with generated images, and one
// containerd per simulated node, each with its own directories and socket,
// plus a Node object per simulated node; and a real one-node cluster
// (StartNode): the control plane's controllers, a kubelet and containerd 2.x
// running pods with runc.
//
// Everything a helper starts is stopped by t.Cleanup, and every child process
// is started with a parent-death signal, so a test that fails, panics or is
// killed leaves no process, mount or port behind.
//
// The binaries come from the project's own install steps (make testbed):
// KUBEBUILDER_ASSETS must name a folder with kube-apiserver and etcd,
// WARMER_NODE_ASSETS (for a real node) one with the kubelet and containerd
// 2.x, and containerd and docker-registry must be on PATH.
//
// This package holds the launchers: the control plane, registries and
// their images, containerd, the simulated fleet and the real node, the
// warmer binary, helm and Prometheus, with what sets up where their
// processes run (audit.go: the API server's Secret audit log; memcg.go: a
// memory cgroup to measure a process in, which shares the real node's
// cgroup code; identity.go: warmer's shipped roles and admission policies
// and the service-account tokens its processes run with; refusals.go: the
// check that fails a test whose warmer process those refused something). What they use, or tests use beside them, without starting
// a process lives in packages of its own below:
//
//   - build: the Kubernetes objects tests create (ImageWarm with options,
//     DockerConfigSecret, RealisticRefs);
//   - faults: proxies that stand between containerd and a registry and
//     misbehave on demand (FaultProxy, SlowProxy);
//   - hostcheck: the guard that undoes the test bed's changes to the host
//     when the test binary dies, the race detector's reports in a
//     process's log (CheckRaces, RaceEnabled), and the search for leaked
//     secrets (SearchLeaks).
//
// None of them imports this package.
package testbed

// TB is the part of testing.TB the test bed uses. A *testing.T satisfies it;
// so does the local sandbox (make demo), which runs the same parts outside a
// test.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}
