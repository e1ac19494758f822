package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestResourcesFitTheManifests warms a node through the real agent and
// controller and holds their measured memory against the requests and
// limits in config/daemonset: the peak must leave the limit half free, and
// the agent's resident memory once idle must fit its request. The figures
// are logged; docs/operations.md#resources quotes them.
func TestResourcesFitTheManifests(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "res"})
	var refs []string
	for i := range 10 {
		refs = append(refs, reg.PushRandom(t, fmt.Sprintf("res/app%d:v1", i), testbed.ImageOptions{LayerSize: 5 * testbed.MB}).Ref)
	}
	refs = append(refs, reg.PushRandom(t, "res/big:v1", testbed.ImageOptions{LayerSize: 50 * testbed.MB}).Ref)
	// The agent runs with its defaults (resync, back-off, info logs), as
	// in the DaemonSet, not with the fast settings of the other tests, and
	// both processes from the plain build: the race detector would
	// multiply what is measured.
	f := testbed.StartFleet(t, map[string]map[string]string{node: {"pool": "res"}},
		testbed.FleetOptions{Agent: &testbed.AgentSettings{LogLevel: "info", DiskThresholdPercent: testbed.DefaultAgent.DiskThresholdPercent}, Plain: true})
	// Twenty ImageWarms over the same eleven images: the agent's work is
	// the union, and its memory should not grow per ImageWarm much.
	for i := range 20 {
		f.Create(t, build.ImageWarm("default", fmt.Sprintf("res%d", i), build.Images(refs...), build.MatchLabel("pool", "res")))
	}
	for i := range 20 {
		if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", fmt.Sprintf("imagewarm/res%d", i), "-n", "default", "--timeout=120s"); err != nil {
			t.Fatalf("kubectl wait: %v\n%s", err, out)
		}
	}
	agent, ctrl := f.Nodes[node].Agent.Pid(), f.Controller.Pid()
	cpu0 := cpuSeconds(t, agent)
	time.Sleep(20 * time.Second)
	idleCPU := cpuSeconds(t, agent) - cpu0

	for _, c := range []struct {
		what, manifest, container string
		pid                       int
		idleMustFitRequest        bool
	}{
		{"agent", "agent_daemonset.yaml", "agent", agent, true},
		{"controller", "controller_deployment.yaml", "controller", ctrl, false},
	} {
		req, lim := manifestMemory(t, c.manifest, c.container)
		peak, now := testbed.ProcStatusKiB(t, c.pid, "VmHWM")*1024, testbed.ProcStatusKiB(t, c.pid, "VmRSS")*1024
		t.Logf("%s: peak RSS %.1f MiB, idle RSS %.1f MiB; manifest requests %.0f MiB, limit %.0f MiB",
			c.what, mib(peak), mib(now), mib(req), mib(lim))
		if peak*2 > lim {
			t.Errorf("%s: peak RSS %.1f MiB leaves less than half of the %.0f MiB limit", c.what, mib(peak), mib(lim))
		}
		if c.idleMustFitRequest && now > req {
			t.Errorf("%s: idle RSS %.1f MiB is above the %.0f MiB request", c.what, mib(now), mib(req))
		}
	}
	t.Logf("agent: %.3f CPU seconds over 20 s idle (%.2f millicores)", idleCPU, idleCPU/20*1000)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// manifestMemory reads a container's memory request and limit from a
// workload in config/daemonset.
func manifestMemory(t *testing.T, file, container string) (request, limit int64) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "config", "daemonset", file))
	if err != nil {
		t.Fatal(err)
	}
	// Both workloads keep their Pod template in the same place.
	var w struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	var doc []byte
	for _, d := range strings.Split(string(raw), "\n---") {
		var m metav1.TypeMeta
		if yaml.Unmarshal([]byte(d), &m) == nil && (m.Kind == "DaemonSet" || m.Kind == "Deployment") {
			doc = []byte(d)
		}
	}
	if err := yaml.Unmarshal(doc, &w); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Spec.Template.Spec.Containers {
		if c.Name == container {
			r, l := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
			if r.IsZero() || l.IsZero() {
				t.Fatalf("%s: container %s has no memory request or limit", file, container)
			}
			return r.Value(), l.Value()
		}
	}
	t.Fatalf("%s has no container %s", file, container)
	return 0, 0
}

// cpuSeconds is the process's user plus system CPU time so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}
