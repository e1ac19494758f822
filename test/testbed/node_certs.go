package testbed

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// kubeletClientUser is the name the API server gives itself when it calls
// the kubelet (logs, exec, port-forward). It is bound to the
// system:kubelet-api-admin role, as cluster installers do.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// kubeletClientCerts is a CA the kubelet trusts for its clients, and the API
// server's client certificate from it, as files.
type kubeletClientCerts struct {
	CA, Cert, Key string
}

// writeKubeletClientCerts makes a fresh CA and the API server's kubelet
// client certificate in dir. The CA is the node's own: envtest mints its
// client CA only as the API server starts, after the flags naming these
// files must be set.
func writeKubeletClientCerts(t TB, dir string) kubeletClientCerts {
	t.Helper()
	ca, caKey, caDER := newCA(t, "warmer-testbed-kubelet-client-ca")
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: kubeletClientUser},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := kubeletClientCerts{
		CA:   filepath.Join(dir, "kubelet-client-ca.crt"),
		Cert: filepath.Join(dir, "kubelet-client.crt"),
		Key:  filepath.Join(dir, "kubelet-client.key"),
	}
	writePEM(t, c.CA, "CERTIFICATE", caDER)
	writePEM(t, c.Cert, "CERTIFICATE", der)
	writePEM(t, c.Key, "EC PRIVATE KEY", keyDER)
	return c
}

// newCA makes a self-signed CA valid for a day.
func newCA(t TB, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key, der
}

// servingCA is the CA that signs the kubelet's serving certificate, as
// files for kube-controller-manager's kubelet-serving signer, and as PEM.
type servingCA struct {
	Cert, Key string
	PEM       []byte
}

// writeServingCA makes the CA kube-controller-manager signs kubelet
// serving certificates with. envtest keeps its own CA's key to itself, so
// the bed's cluster has two CAs: both are published to pods as
// kube-root-ca.crt, as a cluster whose signers differ does.
func writeServingCA(t TB, dir string) servingCA {
	t.Helper()
	_, key, der := newCA(t, "warmer-testbed-kubelet-serving-ca")
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := servingCA{Cert: filepath.Join(dir, "kubelet-serving-ca.crt"), Key: filepath.Join(dir, "kubelet-serving-ca.key"),
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	writePEM(t, c.Cert, "CERTIFICATE", der)
	writePEM(t, c.Key, "EC PRIVATE KEY", keyDER)
	return c
}

func writePEM(t TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// approveServingCert approves the kubelet's request for a serving
// certificate, as a cluster's operator (or an approver they run) does for
// serverTLSBootstrap: kubeadm leaves these to them. It waits until the
// certificate is issued.
func (n *RealNode) approveServingCert(t TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	issued := func(ctx context.Context) error {
		var list certificatesv1.CertificateSigningRequestList
		if err := n.Client.List(ctx, &list); err != nil {
			return err
		}
		for i := range list.Items {
			csr := &list.Items[i]
			if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || csr.Spec.Username != "system:node:"+n.Name {
				continue
			}
			if len(csr.Status.Certificate) > 0 {
				return nil
			}
			if !approved(csr) {
				csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
					Reason: "WarmerTestbed", Message: "the test bed approves its kubelet's serving certificate"})
				if err := n.Client.SubResource("approval").Update(ctx, csr); err != nil {
					return err
				}
			}
		}
		return fmt.Errorf("no serving certificate issued to the kubelet of %s yet", n.Name)
	}
	if err := waitFor(ctx, n.kubelet, "the kubelet's serving certificate", issued); err != nil {
		t.Fatal(err)
	}
}

func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return true
		}
	}
	return false
}
