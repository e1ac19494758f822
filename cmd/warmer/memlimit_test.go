package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestCgroupMemoryLimit reads limits from the files the kernel shows. A
// map stands in for /proc and /sys/fs/cgroup: the cgroup layouts below
// (v1 beside v2, a cgroup namespace, a Pod's limit above its container's)
// are not all on this machine; TestSoftMemoryLimitInACgroup reads a real
// one.
func TestCgroupMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, c := range []struct {
		name string
		fs   fstest.MapFS
		want int64
	}{
		{"v2 in a cgroup namespace", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("134217728\n"),
		}, 128 * mib},
		{"v2 without a namespace: the pod's limit above the container's none", fstest.MapFS{
			"proc/self/cgroup":                           file("0::/kubepods/pod1/ctr\n"),
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": file("max\n"),
			"sys/fs/cgroup/kubepods/pod1/memory.max":     file("268435456\n"),
			"sys/fs/cgroup/kubepods/memory.max":          file("1073741824\n"),
		}, 256 * mib},
		{"v1 memory beside a v2 mount, unlimited above", fstest.MapFS{
			"proc/self/cgroup": file("9:name=systemd:/\n4:memory:/kubepods/pod1/ctr\n0::/\n"),
			"sys/fs/cgroup/memory/kubepods/pod1/ctr/memory.limit_in_bytes": file("134217728\n"),
			"sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes":          file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                   file("9223372036854771712\n"),
		}, 128 * mib},
		{"no limit anywhere", fstest.MapFS{
			"proc/self/cgroup":                    file("0::/user.slice\n"),
			"sys/fs/cgroup/user.slice/memory.max": file("max\n"),
		}, 0},
		{"nothing readable", fstest.MapFS{}, 0},
		{"garbage", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\nnot a line\n"),
			"sys/fs/cgroup/memory.max": file("lots\n"),
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := cgroupMemoryLimit(c.fs); got != c.want {
				t.Errorf("limit %d, want %d", got, c.want)
			}
		})
	}
}

// childEnv marks the test binary run as TestSoftMemoryLimitInACgroup's
// child.
const childEnv = "WARMER_MEMLIMIT_CHILD"

// TestSoftMemoryLimitInACgroup runs this test binary again in a real
// memory cgroup with a limit, as the kubelet runs the agent's container:
// there the process sets its Go soft limit to 90 % of it; with GOMEMLIMIT
// set it leaves the runtime's own.
func TestSoftMemoryLimitInACgroup(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		setSoftMemoryLimit(os.DirFS("/"))
		fmt.Printf("soft-limit=%d\n", debug.SetMemoryLimit(-1))
		return
	}
	cg, err := testbed.NewMemoryCgroup(t, "warmer-memlimit")
	if err != nil {
		t.Fatalf("this test needs a memory cgroup (root, a memory controller): %v", err)
	}
	const limit = 200 << 20
	if err := cg.SetLimit(limit); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, gomemlimit string
		want             int64
	}{
		{"from the cgroup", "", int64(limit * softLimitShare)},
		{"GOMEMLIMIT wins", "64MiB", 64 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			argv := cg.Command(os.Args[0], "-test.run=^TestSoftMemoryLimitInACgroup$", "-test.count=1")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), childEnv+"=1", "GOMEMLIMIT="+c.gomemlimit)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			want := fmt.Sprintf("soft-limit=%d\n", c.want)
			if !strings.Contains(string(out), want) {
				t.Errorf("child said %q, want %q", out, want)
			}
		})
	}
}
