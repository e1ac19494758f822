package cluster

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// testControllerMetrics scrapes the installed controller's /metrics as a
// Prometheus would: over HTTPS, refused with the agent's own mounted token
// (the API server knows it, RBAC does not let it get /metrics) and served
// with the token of a service account bound to the shipped
// warmer-metrics-reader, as docs/guides/monitoring.md says to bind one.
// The controller asks the API server with its in-cluster identity.
func testControllerMetrics(t *testing.T) {
	ctx := context.Background()
	pods := installedPods(t, "controller")
	if len(pods) == 0 {
		t.Fatal("no controller pod")
	}
	pod := pods[0]
	c := pod.Spec.Containers[0]
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
	if i < 0 || pod.Status.PodIP == "" {
		t.Fatalf("pod %s: no metrics port or no IP", pod.Name)
	}
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(c.Ports[i].ContainerPort)))

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "metrics-scraper"}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: testbed.MetricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, o := range []client.Object{sa, crb} {
		if err := node.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = node.Client.Delete(context.Background(), o) })
	}
	tr := &authenticationv1.TokenRequest{}
	if err := node.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("a token of %s: %v", sa.Name, err)
	}

	for _, s := range []struct {
		what, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"the agent's token", mountedToken(t, agentPod(t)), http.StatusForbidden},
		{"a reader's token", tr.Status.Token, http.StatusOK},
	} {
		status, body, err := testbed.GetMetrics("https", addr, s.token)
		if err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if status != s.want {
			t.Errorf("%s: status %d, want %d: %.200s", s.what, status, s.want, body)
		}
		if s.want == http.StatusOK && !strings.Contains(body, "warmer_imagewarm_nodes") {
			t.Errorf("%s: no warmer_imagewarm_nodes in %.300s", s.what, body)
		}
	}
}
