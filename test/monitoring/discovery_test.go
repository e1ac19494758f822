package monitoring

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// targetGroup is one entry of a file_sd file.
type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

var unsafeLabel = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// discover writes a file_sd file with the targets Prometheus's Kubernetes
// pod discovery would find in the warmer-system namespace: one per
// declared container port, at podIP:port, with the pod role's meta labels
// that the documented relabelling reads.
func discover(t *testing.T, f *testbed.Fleet) string {
	t.Helper()
	var pods corev1.PodList
	if err := f.CP.Client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var groups []targetGroup
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				l := map[string]string{
					"__meta_kubernetes_namespace":                 p.Namespace,
					"__meta_kubernetes_pod_name":                  p.Name,
					"__meta_kubernetes_pod_ip":                    p.Status.PodIP,
					"__meta_kubernetes_pod_node_name":             p.Spec.NodeName,
					"__meta_kubernetes_pod_phase":                 string(p.Status.Phase),
					"__meta_kubernetes_pod_container_name":        c.Name,
					"__meta_kubernetes_pod_container_port_name":   port.Name,
					"__meta_kubernetes_pod_container_port_number": strconv.Itoa(int(port.ContainerPort)),
				}
				for k, v := range p.Labels {
					l["__meta_kubernetes_pod_label_"+unsafeLabel.ReplaceAllString(k, "_")] = v
				}
				addr := p.Status.PodIP + ":" + strconv.Itoa(int(port.ContainerPort))
				groups = append(groups, targetGroup{Targets: []string{addr}, Labels: l})
			}
		}
	}
	raw, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pods.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
