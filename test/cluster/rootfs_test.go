package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// metaDB is where containerd keeps its metadata (every container's spec
// and environment), below its root.
const metaDB = "io.containerd.metadata.v1.bolt/meta.db"

// testRootFilesystems runs a pod with the installed agent's securityContext
// and volumes (as the DaemonSet has them, so the check follows the
// manifests) that tries to write into the root filesystem of every
// container on the node, all mounted below containerd's state directory,
// and to read containerd's metadata database, both where the bed's
// containerd keeps it and where a node's does: every attempt must fail
// with EROFS, EACCES or ENOENT.
func testRootFilesystems(t *testing.T) {
	ctx := context.Background()
	var ds appsv1.DaemonSet
	if err := node.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "warmer-agent"}, &ds); err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	agent := spec.Containers[slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "agent" })]

	rootfs := rootFilesystems(t)
	var args []string
	reachable := map[string]bool{} // the rootfs paths in the pod
	for _, dir := range rootfs {
		if p, ok := podPath(spec.Volumes, agent.VolumeMounts, dir); ok {
			args = append(args, "-write", p)
			reachable[p] = true
		}
	}
	// The folders mounted themselves, too.
	for _, m := range agent.VolumeMounts {
		args = append(args, "-write", m.MountPath)
	}
	db := filepath.Join(node.Containerd.Root(), metaDB)
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("containerd's metadata database: %v", err)
	}
	reads := []string{"/var/lib/containerd/" + metaDB}
	if p, ok := podPath(spec.Volumes, agent.VolumeMounts, db); ok && p != reads[0] {
		reads = append(reads, p)
	}
	for _, p := range reads {
		args = append(args, "-read", p)
	}

	results := runProbe(t, spec, agent, args)
	found := 0
	seen := map[string]int{} // op and error: attempts
	for _, r := range results {
		if r.Op == "write" && reachable[r.Path] && r.Stat == "" {
			found++
		}
		seen[r.Op+" "+r.Err]++
		if !slices.Contains([]string{"EROFS", "EACCES", "ENOENT"}, r.Err) {
			t.Errorf("a pod with the agent's securityContext and volumes could %s %s (error %q)", r.Op, r.Path, r.Err)
		}
	}
	t.Logf("%d of %d root filesystems in sight; attempts by outcome: %v", found, len(rootfs), seen)
	// Without root filesystems in sight the check would prove nothing.
	if found < 2 {
		t.Errorf("the probe saw %d of the node's %d container root filesystems, want at least the agent's and the controller's: %+v", found, len(rootfs), results)
	}
}

// rootFilesystems are the host paths of every container's root filesystem
// mounted below containerd's state directory; among them the agent's and
// the controller's, or the test fails.
func rootFilesystems(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	prefix := node.Containerd.StateDir() + "/"
	var dirs []string
	for line := range strings.Lines(string(b)) {
		// The fifth field is the mount point.
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], prefix) && filepath.Base(f[4]) == "rootfs" {
			dirs = append(dirs, f[4])
		}
	}
	for _, component := range []string{"agent", "controller"} {
		var pods corev1.PodList
		err := node.Client.List(context.Background(), &pods, client.InNamespace(installNamespace),
			client.MatchingLabels{"app.kubernetes.io/name": "warmer", "app.kubernetes.io/component": component})
		if err != nil || len(pods.Items) == 0 || len(pods.Items[0].Status.ContainerStatuses) == 0 {
			t.Fatalf("the %s's pod: %v", component, err)
		}
		id := containerID(t, &pods.Items[0])
		if !slices.ContainsFunc(dirs, func(d string) bool { return filepath.Base(filepath.Dir(d)) == id }) {
			t.Fatalf("no root filesystem of the %s's container %s among the mounts below %s: %v", component, id, prefix, dirs)
		}
	}
	return dirs
}

// podPath is where a host path shows in a container with these volumes
// and mounts, if it does.
func podPath(volumes []corev1.Volume, mounts []corev1.VolumeMount, host string) (string, bool) {
	for _, m := range mounts {
		i := slices.IndexFunc(volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || volumes[i].HostPath == nil {
			continue
		}
		src := filepath.Join(volumes[i].HostPath.Path, m.SubPath)
		if rest, ok := strings.CutPrefix(host, src); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
			return m.MountPath + rest, true
		}
	}
	return "", false
}

// probeResult is a line fsprobe prints.
type probeResult struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Stat string `json:"stat"`
	Err  string `json:"err"`
}

// runProbe runs fsprobe with args in a pod with the agent pod's security
// settings and volumes, and the agent container's securityContext and
// volume mounts, and returns what it printed.
func runProbe(t *testing.T, spec corev1.PodSpec, agent corev1.Container, args []string) []probeResult {
	t.Helper()
	reg.Push(t, "warmer-dev/testbed-fsprobe:v1", testbed.GoImage(t, "./test/cluster/fsprobe"))
	ns := namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fsprobe", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                     node.Name,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			HostNetwork:                  spec.HostNetwork,
			HostPID:                      spec.HostPID,
			HostIPC:                      spec.HostIPC,
			SecurityContext:              spec.SecurityContext,
			Volumes:                      spec.Volumes,
			Containers: []corev1.Container{{
				Name:            "fsprobe",
				Image:           mirrored + "/warmer-dev/testbed-fsprobe:v1",
				Args:            args,
				SecurityContext: agent.SecurityContext,
				VolumeMounts:    agent.VolumeMounts,
			}},
		},
	}
	if err := node.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, pod, corev1.PodSucceeded)
	out := kubectl(t, "logs", "-n", ns, pod.Name)
	var results []probeResult
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r probeResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("fsprobe printed %q: %v", out, err)
		}
		results = append(results, r)
	}
	if want := len(args) / 2; len(results) != want {
		t.Fatalf("fsprobe reported %d attempts, want %d:\n%s", len(results), want, out)
	}
	return results
}
