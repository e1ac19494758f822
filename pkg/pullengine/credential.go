package pullengine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const redacted = "<redacted>"

// Credential is one registry login from a docker config. Every way of
// printing it (String, GoString, any fmt verb, JSON, logr) shows only the
// registry key it came from, never the username or password.
type Credential struct {
	// Registry is the docker config key the login came from, e.g.
	// "registry.example.com:5000" or "*.example.com/team". Not secret.
	Registry string
	// Username and Password authenticate to the registry.
	Username string
	Password string
}

// String shows the registry only.
func (c Credential) String() string {
	return fmt.Sprintf("Credential{Registry: %s, Username: %s, Password: %s}", quoteKey(c.Registry), redacted, redacted)
}

// GoString keeps %#v as safe as %v.
func (c Credential) GoString() string { return "pullengine." + c.String() }

// Format makes every verb (%v, %+v, %s, %q, %x, ...) print the redacted form.
func (c Credential) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, c.GoString())
		return
	}
	_, _ = io.WriteString(f, c.String())
}

// MarshalJSON keeps structured loggers that encode through JSON safe.
func (c Credential) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"registry": redactUserinfo(c.Registry), "username": redacted, "password": redacted})
}

// MarshalLog is what logr sinks print for a Credential.
func (c Credential) MarshalLog() any { return c.String() }

// authConfig is the CRI form. ServerAddress stays empty: containerd refuses
// a bare host:port there and drops credentials whose address differs from
// the image's registry; matching is done by the keyring instead.
func (c Credential) authConfig() *runtimeapi.AuthConfig {
	return &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password}
}

// credentialsHash fingerprints a candidate list, so that back-off can be
// keyed on it: a fixed secret changes the key and retries at once. The hash
// is one-way and only ever used as a map key.
func credentialsHash(creds []Credential) string {
	if len(creds) == 0 {
		return "anonymous"
	}
	h := sha256.New()
	for _, c := range creds {
		for _, s := range []string{c.Username, c.Password} {
			_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
			_, _ = io.WriteString(h, s)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
