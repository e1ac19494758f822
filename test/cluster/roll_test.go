package cluster

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
)

// nextTag is the version of the second image testNewImageTag rolls to.
const nextTag = "v0.0.0-cluster-next"

// testNewImageTag builds the image again with another version, imports it
// and applies the install's layer with that tag, as a user upgrading does:
// the agent's DaemonSet rolls to it, and the new agent finds every image it
// wants present without pulling any again (neither it nor the kubelet asks
// containerd for a pull), with the ImageWarms Ready all along.
func testNewImageTag(t *testing.T, layer string) {
	importWarmerImage(t, nextTag)
	dir := t.TempDir()
	// The install runs the image pushed to the test registry; the new one
	// is imported under the release's name.
	pushed := strings.TrimSuffix(pushWarmerImage(t), ":"+warmerTag)
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\nimages:\n  - name: %s\n    newName: %s\n    newTag: %s\n",
		relPath(t, dir, layer), pushed, warmerRepo, nextTag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	old := agentPod(t)
	ready := readySince(t)
	mark := pullLogMark(t)
	rolled := time.Now()

	kubectl(t, "apply", "-k", dir)
	kubectl(t, "rollout", "status", "--namespace", installNamespace, "daemonset/warmer-agent", "--timeout=3m")
	kubectl(t, "rollout", "status", "--namespace", installNamespace, "deployment/warmer-controller", "--timeout=3m")
	waitWorkloads(t)
	pod := agentPod(t)
	if pod.UID == old.UID {
		t.Fatalf("the agent's pod %s was not replaced", pod.Name)
	}
	if got, want := pod.Spec.Containers[0].Image, warmerRepo+":"+nextTag; got != want {
		t.Fatalf("the new agent runs %s, want %s", got, want)
	}

	// The new agent has looked at the node once it reports every image
	// it wants present; any pull it started would be logged by then.
	var m map[string]*dto.MetricFamily
	poll(t, 2*time.Minute, "the new agent finding every wanted image present", func() error {
		var err error
		if m, err = scrapeAgent(pod); err != nil {
			return err
		}
		if start := metricSum(m, "process_start_time_seconds", nil); start < float64(rolled.Unix()-1) {
			return fmt.Errorf("metrics of an agent started at %v, before the roll", start)
		}
		present := metricSum(m, "warmer_node_images", map[string]string{"state": "Present"})
		desired := metricSum(m, "warmer_node_images_desired", nil)
		if desired == 0 || present != desired {
			return fmt.Errorf("%v of %v wanted images present", present, desired)
		}
		return nil
	})
	if n := metricSum(m, "warmer_image_pulls_total", nil); n != 0 {
		t.Errorf("the new agent counts %v pulls, want none", n)
	}
	checkNoPulls(t, mark)
	if now := readySince(t); !mapsEqual(now, ready) {
		t.Errorf("the ImageWarms' Ready conditions moved during the roll: before %v, after %v", ready, now)
	}
}

// scrapeAgent reads the agent pod's Prometheus metrics: it uses the
// node's network, so its metrics port is on the node's address.
func scrapeAgent(pod *corev1.Pod) (map[string]*dto.MetricFamily, error) {
	c := pod.Spec.Containers[0]
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
	if i < 0 || pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s: no metrics port or no IP", pod.Name)
	}
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(c.Ports[i].ContainerPort))) + "/metrics"
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// metricSum adds up the samples of a counter or gauge whose labels include
// labels.
func metricSum(m map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		match := 0
		for _, l := range s.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match == len(labels) {
			sum += s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	return sum
}

// pullRequest matches the line containerd's CRI logs (at info) for every
// PullImage call it gets, from the agent or the kubelet, before pulling.
var pullRequest = regexp.MustCompile(`msg="PullImage \\"([^"\\]+)\\""`)

// containerdLog is the node's containerd log.
func containerdLog() string { return filepath.Join(node.Containerd.Dir, "containerd.log") }

// pullLogMark is where the node's containerd log ends now.
func pullLogMark(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(containerdLog())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// checkNoPulls fails the test for every PullImage call containerd logged
// after mark. The lines before it must show the samples' pulls: otherwise
// the log would not show pulls at all and the check would pass blindly.
func checkNoPulls(t *testing.T, mark int64) {
	t.Helper()
	b, err := os.ReadFile(containerdLog())
	if err != nil {
		t.Fatal(err)
	}
	var before []string
	for _, m := range pullRequest.FindAllSubmatch(b[:mark], -1) {
		before = append(before, string(m[1]))
	}
	if !slices.ContainsFunc(before, func(ref string) bool { return strings.HasSuffix(ref, "busybox:1.36") }) {
		t.Fatalf("containerd's log shows no PullImage of the samples' busybox:1.36 (pulls logged: %v): it cannot tell whether anything was pulled", before)
	}
	for _, m := range pullRequest.FindAllSubmatch(b[mark:], -1) {
		t.Errorf("%s was pulled again", m[1])
	}
}
