package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// TokenService stands in for a cloud's token service, which a
// credential-provider plugin calls over HTTPS (ECR's
// GetAuthorizationToken, ACR's token exchange): on 127.0.0.1, with a
// certificate of its own CA, it answers Token to a GET carrying the basic
// auth ClientID and ClientSecret, and 401 to anything else.
type TokenService struct {
	// URL is the service's https:// address.
	URL string
	// CAPEM is its CA's certificate: a client that trusts the system's
	// CA bundle reaches it only when this is in the bundle.
	CAPEM []byte

	requests atomic.Int64
}

// StartTokenService starts a token service that hands token to
// clientID:secret, stopped at cleanup.
func StartTokenService(t TB, clientID, secret, token string) *TokenService {
	t.Helper()
	ca, caKey, caDER := newCA(t, "warmer-testbed-token-service-ca")
	ts := &TokenService{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.requests.Add(1)
		if id, s, ok := r.BasicAuth(); !ok || id != clientID || s != secret {
			http.Error(w, "unknown client", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(token))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{servingCert(t, ca, caKey)}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ts.URL = srv.URL
	return ts
}

// Requests is how many requests reached the service: none when every
// client refused its certificate.
func (ts *TokenService) Requests() int64 { return ts.requests.Load() }

// servingCert is a certificate for 127.0.0.1 signed by ca, valid for a
// day.
func servingCert(t TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
