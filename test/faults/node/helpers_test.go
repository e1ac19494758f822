// Package node injects node, runtime and control-plane faults into a real
// warmer fleet (test/testbed: real kube-apiserver and etcd, one containerd
// per simulated node, real registries, the built agent and controller
// binaries) and checks what must hold afterwards. docs/reliability.md lists
// each fault with what was observed.
package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

const ns = "faults"

// startFleet starts a fleet with the test namespace created.
func startFleet(t *testing.T, labels map[string]map[string]string, opts testbed.FleetOptions) *testbed.Fleet {
	t.Helper()
	f := testbed.StartFleet(t, labels, opts)
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	return f
}

// key is the normalised spelling of ref the NodeWarm uses.
func key(t testing.TB, ref string) string {
	t.Helper()
	r, err := imageref.Parse(ref)
	if err != nil {
		t.Fatalf("parsing %s: %v", ref, err)
	}
	return r.String()
}

// nodeWarm reads a node's NodeWarm.
func nodeWarm(f *testbed.Fleet, node string) (*warmv1.NodeWarm, error) {
	var nw warmv1.NodeWarm
	err := f.CP.Client.Get(context.Background(), types.NamespacedName{Name: node}, &nw)
	return &nw, err
}

// listsExactly checks that the node's NodeWarm lists exactly the wanted
// images (normalised), each once, and with every one Present when present
// is set.
func listsExactly(f *testbed.Fleet, node string, want []string, present bool) error {
	nw, err := nodeWarm(f, node)
	if err != nil {
		return err
	}
	var got []string
	for _, img := range nw.Status.Images {
		if present && img.State != warmv1.ImagePresent {
			return fmt.Errorf("%s: %s is %s (%s %s)", node, img.Image, img.State, img.Reason, img.Message)
		}
		got = append(got, img.Image)
	}
	if dup := duplicates(got); len(dup) > 0 {
		return fmt.Errorf("%s: NodeWarm lists %v more than once", node, dup)
	}
	want = slices.Sorted(slices.Values(want))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: NodeWarm lists %d images %v, want %d %v", node, len(got), got, len(want), want)
	}
	return nil
}

func duplicates(s []string) []string {
	seen := map[string]int{}
	var out []string
	for _, v := range s {
		if seen[v]++; seen[v] == 2 {
			out = append(out, v)
		}
	}
	return out
}

// ready asks the agent's /readyz, which fails while its CRI does not answer.
func ready(n *testbed.Node) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + n.Probe + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// wantRuntimeReady checks the NodeWarm's RuntimeReady condition.
func wantRuntimeReady(f *testbed.Fleet, node string, want metav1.ConditionStatus) error {
	nw, err := nodeWarm(f, node)
	if err != nil {
		return err
	}
	for _, c := range nw.Status.Conditions {
		if c.Type == "RuntimeReady" {
			if c.Status != want {
				return fmt.Errorf("%s: RuntimeReady %s (%s), want %s", node, c.Status, c.Reason, want)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no RuntimeReady condition", node)
}

// warmReady checks that an ImageWarm's status is Ready with nodes ready
// nodes, for its current generation.
func warmReady(f *testbed.Fleet, name string, nodes int32) error {
	var iw warmv1.ImageWarm
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &iw); err != nil {
		return err
	}
	st := iw.Status
	if st.ObservedGeneration != iw.Generation || st.Nodes.Matching != nodes || st.Nodes.Ready != nodes {
		return fmt.Errorf("%s: generation %d observed %d, nodes %+v", name, iw.Generation, st.ObservedGeneration, st.Nodes)
	}
	for _, c := range st.Conditions {
		if c.Type == warmv1.ConditionReady && c.Status == metav1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("%s: not Ready: %+v", name, st.Conditions)
}

// criConsistent checks that the runtime holds no half-present image: every
// image CRI lists answers ImageStatus in full, and containerd's own check
// finds every image's content complete. A pull cut short must leave
// nothing, or something whole.
func criConsistent(t *testing.T, n *testbed.Node) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := n.CRI.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return fmt.Errorf("ListImages: %w", err)
	}
	for _, img := range list.Images {
		if img.Id == "" || img.Size == 0 || len(img.RepoTags)+len(img.RepoDigests) == 0 {
			return fmt.Errorf("partial entry in ListImages: %+v", img)
		}
		st, err := n.CRI.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img.Id}})
		if err != nil {
			return fmt.Errorf("ImageStatus %s: %w", img.Id, err)
		}
		if st.Image == nil || st.Image.Id != img.Id || st.Image.Size != img.Size {
			return fmt.Errorf("ImageStatus of listed %s disagrees: %+v", img.Id, st.Image)
		}
	}
	return contentComplete(ctx, n)
}

// contentComplete runs `ctr images check`, which reads every image's
// manifest, config and layers from containerd's content store and says
// "complete" or "incomplete (n/m)".
func contentComplete(ctx context.Context, n *testbed.Node) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.Containerd.Socket, "-n", "k8s.io", "images", "check").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images check: %w\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		if !strings.Contains(line, " complete ") {
			return fmt.Errorf("image not complete in containerd: %s", line)
		}
	}
	return nil
}

// rss is a process's resident set size in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	v, err := rssOf(pid)
	if err != nil {
		t.Fatalf("reading the agent's memory: %v", err)
	}
	return v
}

// rssOf reads VmRSS from /proc/PID/status.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// pushSmall pushes n distinct images of size bytes under prefix.
func pushSmall(t *testing.T, r *testbed.Registry, prefix string, n int, size int64) []testbed.Image {
	t.Helper()
	var out []testbed.Image
	for i := range n {
		out = append(out, r.PushRandom(t, fmt.Sprintf("%s%d:v1", prefix, i), testbed.ImageOptions{LayerSize: size}))
	}
	return out
}

// through rewrites image references to go through a proxy.
func through(imgs []testbed.Image, r *testbed.Registry, proxy *faults.SlowProxy) []string {
	var out []string
	for _, img := range imgs {
		out = append(out, strings.Replace(img.Ref, r.Host, proxy.Host, 1))
	}
	return out
}

// waitPulling waits until the NodeWarm shows ref being pulled.
func waitPulling(t *testing.T, f *testbed.Fleet, node, ref string) {
	t.Helper()
	testbed.Eventually(t, 60*time.Second, "pull of "+ref+" under way on "+node, func() error {
		img, err := f.NodeImage(node, ref)
		if err != nil {
			return err
		}
		if img.State != warmv1.ImagePulling {
			return fmt.Errorf("state %s", img.State)
		}
		return nil
	})
}

// keys normalises refs.
func keys(t *testing.T, refs []string) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = key(t, r)
	}
	return out
}
