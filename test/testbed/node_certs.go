package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"time"
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "warmer-testbed-kubelet-client-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
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

func writePEM(t TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
