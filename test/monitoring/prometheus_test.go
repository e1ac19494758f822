// Package monitoring checks warmer's monitoring story end to end: a real
// Prometheus server, configured with the scrape jobs users are told to paste
// (config/prometheus/scrape-configs.yaml), scrapes the real agent and
// controller processes and answers PromQL about the pulls; every query of
// the Grafana dashboard (config/grafana/warmer-dashboard.json) evaluates on
// that server.
//
// Debian's prometheus package is built without Kubernetes service
// discovery, so the test stands in for it: it lists the Pod objects from
// the API server and hands Prometheus, through file-based discovery, the
// targets and __meta_kubernetes_pod_* labels that the pod role would give.
// The documented relabelling then runs unchanged.
package monitoring

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const (
	ns   = testbed.SystemNamespace
	node = "node-1"
	// saTokenFile is where a Pod finds its service account's token.
	saTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
)

// TestPrometheusScrapesAgent warms two images on one node and asks a real
// Prometheus, fed by the documented scrape jobs, for the pull counters.
func TestPrometheusScrapesAgent(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "mon"})
	a := reg.PushRandom(t, "mon/a:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	b := reg.PushRandom(t, "mon/b:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	// The fleet installs warmer's namespace (ns) with its service accounts.
	f := testbed.StartFleet(t, map[string]map[string]string{node: {"pool": "mon"}}, testbed.FleetOptions{})
	stand := standIns(t, f)
	prom := testbed.StartPrometheus(t, promConfig(t, discover(t, f), f.CP.ScraperToken(t, true)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log:\n%s", prom.Log(40))
		}
	})

	testbed.Eventually(t, 60*time.Second, "both jobs discovered and up", func() error {
		for _, job := range []string{"warmer-agent", "warmer-controller"} {
			if err := wantValue(t, prom, fmt.Sprintf(`up{job=%q, namespace=%q, pod=%q, node=%q}`, job, ns, stand[job], node), 1); err != nil {
				return err
			}
		}
		return nil
	})

	iw := build.ImageWarm("default", "mon", build.Images(a.Ref, b.Ref), build.MatchLabel("pool", "mon"))
	f.Create(t, iw)
	if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/mon", "-n", "default", "--timeout=90s"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	testbed.Eventually(t, 30*time.Second, "two successful pulls in Prometheus", func() error {
		return wantValue(t, prom, fmt.Sprintf(`sum(warmer_image_pulls_total{job="warmer-agent", node=%q, result="success"})`, node), 2)
	})
	testbed.Eventually(t, 30*time.Second, "controller counts the node ready", func() error {
		return wantValue(t, prom, `warmer_imagewarm_nodes{job="warmer-controller", imagewarm_namespace="default", imagewarm="mon", state="ready"}`, 1)
	})
	if err := wantValue(t, prom, `sum(warmer_image_pulls_total{job="warmer-agent", result="failure"}) or vector(0)`, 0); err != nil {
		t.Error(err)
	}

	// A missing tag: the failure counters and back-offs appear, by reason.
	f.Create(t, build.ImageWarm("default", "missing", build.Images(reg.Ref("mon/a:nope")), build.MatchLabel("pool", "mon")))
	testbed.Eventually(t, 30*time.Second, "a NotFound failure and back-off in Prometheus", func() error {
		for _, m := range []string{"warmer_image_pulls_total", "warmer_image_pull_backoffs_total"} {
			vec, err := prom.Query(t, fmt.Sprintf(`sum(%s{job="warmer-agent", node=%q, reason="NotFound"})`, m, node))
			if err != nil {
				return err
			}
			if len(vec) != 1 || vec[0].Value < 1 {
				return fmt.Errorf("%s with reason NotFound: %v", m, vec)
			}
		}
		return nil
	})

	t.Run("dashboard queries evaluate", func(t *testing.T) { checkDashboard(t, prom) })
	t.Run("alerting rules load and evaluate", func(t *testing.T) { checkRules(t, prom) })
}

// standIns creates Pod objects that stand for the agent's and the
// controller's Pods: the processes run on loopback, not in Pods, so each
// object carries the labels and port name of the real manifests and points
// its IP and port at the process. Returns pod names by job.
func standIns(t *testing.T, f *testbed.Fleet) map[string]string {
	t.Helper()
	pods := map[string]string{}
	for _, s := range []struct{ job, component, addr string }{
		{"warmer-agent", "agent", f.Nodes[node].Metrics},
		{"warmer-controller", "controller", f.ControllerMetrics},
	} {
		_, portStr, err := net.SplitHostPort(s.addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(portStr)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.job + "-x1", Labels: map[string]string{
				"app.kubernetes.io/name": "warmer", "app.kubernetes.io/component": s.component}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
				Name: s.component, Image: "warmer:test",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(port)}, {Name: "health", ContainerPort: 1}},
			}}},
		}
		f.Create(t, pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
		if err := f.CP.Client.Status().Update(context.Background(), pod); err != nil {
			t.Fatalf("setting the stand-in Pod's IP: %v", err)
		}
		pods[s.job] = pod.Name
	}
	return pods
}

// promConfig is the documented scrape jobs with their Kubernetes discovery
// replaced by the file sdFile (see the package comment), and a 1 s interval
// so the test is quick. Relabelling, scheme and TLS are left exactly as
// documented; a job reading the Pod's service-account token reads token
// instead, a token of a service account bound to warmer-metrics-reader as
// the guide says to bind Prometheus's.
func promConfig(t *testing.T, sdFile, token string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "config", "prometheus", "scrape-configs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	if len(jobs) != 2 {
		t.Fatalf("scrape-configs.yaml has %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		job := j.(map[string]any)
		sd, _ := job["kubernetes_sd_configs"].([]any)
		if len(sd) != 1 || sd[0].(map[string]any)["role"] != "pod" {
			t.Fatalf("job %v: want one kubernetes_sd_configs entry with role pod", job["job_name"])
		}
		delete(job, "kubernetes_sd_configs")
		job["file_sd_configs"] = []any{map[string]any{"files": []any{sdFile}}}
		if auth, ok := job["authorization"].(map[string]any); ok {
			if auth["credentials_file"] != saTokenFile {
				t.Fatalf("job %v reads its token from %v, want the Pod's service-account token %s", job["job_name"], auth["credentials_file"], saTokenFile)
			}
			auth["credentials_file"] = tokenFile
		}
	}
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"}
	cfg["rule_files"] = []any{filepath.Join(testbed.RepoRoot(t), "config", "prometheus", "rules.yaml")}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// wantValue checks that expr gives exactly one sample with value want.
func wantValue(t *testing.T, prom *testbed.Prometheus, expr string, want float64) error {
	t.Helper()
	vec, err := prom.Query(t, expr)
	if err != nil {
		return err
	}
	if len(vec) != 1 || float64(vec[0].Value) != want {
		return fmt.Errorf("%s = %v, want one sample of %v", expr, vec, want)
	}
	return nil
}
