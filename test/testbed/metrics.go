package testbed

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsReaderRole is the ClusterRole config/rbac ships, bound to no one,
// that lets a scraper read an authenticated /metrics.
const MetricsReaderRole = "warmer-metrics-reader"

// ScraperToken installs the shipped identity and returns a token of a
// service account in SystemNamespace standing for a Prometheus: bound to
// MetricsReaderRole when reader is true, as docs/guides/monitoring.md
// says to bind one, and to nothing otherwise.
func (cp *ControlPlane) ScraperToken(t TB, reader bool) string {
	t.Helper()
	cp.InstallIdentity(t)
	ctx := context.Background()
	sa := "metrics-stranger"
	if reader {
		sa = "metrics-scraper"
	}
	objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: sa}}}
	if reader {
		objs = append(objs, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "testbed-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReaderRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: SystemNamespace, Name: sa}},
		})
	}
	for _, o := range objs {
		if err := cp.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	return cp.requestToken(t, sa, nil)
}

// GetMetrics GETs scheme://addr/metrics, with token as a bearer token
// unless it is empty, and returns the status and body. Over https it
// trusts the certificate the process made for itself, as a scraper of an
// in-memory self-signed certificate must.
func GetMetrics(scheme, addr, token string) (status int, body string, err error) {
	req, err := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metricsClient scrapes; it skips verification of the self-signed
// certificates of authenticated /metrics (the token is what is checked).
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed, made in memory at start
}}

// ScrapeController returns the controller's /metrics, read over HTTPS
// with a reader's token, as a Prometheus configured as documented does.
func (f *Fleet) ScrapeController(t TB) string {
	t.Helper()
	status, body, err := GetMetrics(f.ControllerMetricsScheme, f.ControllerMetrics, f.CP.ScraperToken(t, true))
	if err != nil {
		t.Fatalf("scraping the controller: %v", err)
	}
	if status != http.StatusOK {
		t.Fatalf("scraping the controller: status %d: %s", status, body)
	}
	return body
}

// metricsScheme is the scheme a warmer process started with args serves
// /metrics on: --metrics-secure defaults to true for the controller only.
func metricsScheme(args []string) string {
	secure := slices.Contains(args, "controller")
	for _, a := range args {
		switch a {
		case "--metrics-secure", "--metrics-secure=true":
			secure = true
		case "--metrics-secure=false":
			secure = false
		}
	}
	if secure {
		return "https"
	}
	return "http"
}

// metricsAnswers tells whether a process's /metrics answered the wait: an
// authenticated one is up when it refuses the wait's anonymous request.
func metricsAnswers(scheme string, status int) bool {
	return status == http.StatusOK || scheme == "https" && status == http.StatusUnauthorized
}
