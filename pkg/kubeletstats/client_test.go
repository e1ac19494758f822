package kubeletstats

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The kubelet stand-in: an httptest TLS server that answers
// /stats/summary as a kubelet with webhook authorization would, and only
// to the expected bearer token. No real kubelet runs in this package's
// tests; the test bed's real node checks the same client against one.
const token = "agent-token"

type fakeKubelet struct {
	*httptest.Server
	body    []byte
	headers http.Header
}

func startKubelet(t *testing.T, body []byte) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{body: body}
	k.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.headers = r.Header.Clone()
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case r.URL.Path != "/stats/summary" || r.Method != http.MethodGet:
			http.Error(w, "Forbidden (user=agent, verb=get, resource=nodes, subresource(s)=[proxy])", http.StatusForbidden)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(k.body)
		}
	}))
	t.Cleanup(k.Close)
	return k
}

// hostPort splits the server's address for New.
func (k *fakeKubelet) hostPort(t *testing.T) (string, int) {
	t.Helper()
	u, err := url.Parse(k.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(u.Host)
	p, _ := strconv.Atoi(port)
	return host, p
}

// caPEM is the server's certificate as a CA bundle.
func (k *fakeKubelet) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.Certificate().Raw})
}

// creds is what the agent has in a Pod: a token file and the cluster's CA.
func creds(t *testing.T, ca []byte, extra func(*rest.Config)) *rest.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "https://apiserver.invalid:6443", BearerTokenFile: path, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	if extra != nil {
		extra(cfg)
	}
	return cfg
}

func readFixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/summary.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestImageFs(t *testing.T) {
	k := startKubelet(t, readFixture(t))
	host, port := k.hostPort(t)
	// A kubeconfig's server name and impersonation belong to the API
	// server: neither may reach the kubelet.
	c, err := New(creds(t, k.caPEM(), func(c *rest.Config) {
		c.ServerName = "apiserver.invalid"
		c.Impersonate = rest.ImpersonationConfig{UserName: "someone-else"}
	}), host, Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ImageFs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// node.runtime.imageFs, not node.fs (the root filesystem) nor
	// containerFs.
	want := FsStats{CapacityBytes: 50000000000, AvailableBytes: 12000000000, UsedBytes: 9000000000}
	if got != want {
		t.Errorf("ImageFs = %+v, want %+v", got, want)
	}
	if v := k.headers.Get("Impersonate-User"); v != "" {
		t.Errorf("sent Impersonate-User %q to the kubelet", v)
	}
}

func TestTLSVerification(t *testing.T) {
	k := startKubelet(t, readFixture(t))
	host, port := k.hostPort(t)
	// httptest's servers share one certificate: the other CA is made here.
	otherCA := newCA(t)
	otherFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(otherFile, otherCA, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeletFile := filepath.Join(t.TempDir(), "kubelet-ca.crt")
	if err := os.WriteFile(kubeletFile, k.caPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cluster []byte
		opts    Options
		ok      bool
	}{
		{"the cluster's CA signs the kubelet's certificate", k.caPEM(), Options{}, true},
		{"the cluster's CA does not", otherCA, Options{}, false},
		{"the kubelet's own CA given", otherCA, Options{CAFile: kubeletFile}, true},
		{"another CA given", k.caPEM(), Options{CAFile: otherFile}, false},
		{"verification skipped", otherCA, Options{InsecureSkipVerify: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Port = port
			c, err := New(creds(t, tt.cluster, nil), host, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ImageFs(context.Background())
			if (err == nil) != tt.ok {
				t.Fatalf("error %v, want success %v", err, tt.ok)
			}
			var unknown x509.UnknownAuthorityError
			if !tt.ok && !errors.As(err, &unknown) {
				t.Errorf("error %v is not about the certificate's authority", err)
			}
		})
	}
}

// newCA returns a fresh self-signed CA certificate in PEM.
func newCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "another CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		token string
		want  string
	}{
		{"no image filesystem", `{"node":{"nodeName":"node-a","runtime":{}}}`, token, "no image filesystem"},
		{"zero capacity", `{"node":{"runtime":{"imageFs":{"capacityBytes":0,"availableBytes":0}}}}`, token, "no image filesystem"},
		{"not JSON", `<html>`, token, "decoding"},
		{"refused", `{}`, "wrong", "401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := startKubelet(t, []byte(tt.body))
			host, port := k.hostPort(t)
			cfg := &rest.Config{BearerToken: tt.token, TLSClientConfig: rest.TLSClientConfig{CAData: k.caPEM()}}
			c, err := New(cfg, host, Options{Port: port})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ImageFs(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Errorf("the error carries the token: %v", err)
			}
		})
	}
	if _, err := New(&rest.Config{}, "", Options{}); err == nil {
		t.Error("New accepted an empty address")
	}
}
