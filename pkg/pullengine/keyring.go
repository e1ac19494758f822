package pullengine

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// dockerHubAliases are registry keys that all mean Docker Hub, whose images
// normalise to the domain "docker.io".
var dockerHubAliases = map[string]bool{"docker.io": true, "index.docker.io": true, "registry-1.docker.io": true}

// Keyring holds registry logins from image pull secrets and finds those that
// apply to an image, the kubelet's way:
//
//   - a key's host must match the image's registry label by label, where a
//     label may be a glob ("*.example.com" matches "a.example.com" but not
//     "a.b.example.com" nor "example.com");
//   - a port must match exactly, and a key without one does not match a
//     registry with one;
//   - a key's path must be a prefix of the repository path (a plain string
//     prefix, as in the kubelet: "host/team" also matches "host/teams/x");
//   - "https://", "http://" and a leading "/v1/" or "/v2/" are ignored, so
//     "https://index.docker.io/v1/" is a host-only key;
//   - index.docker.io, registry-1.docker.io and docker.io all mean Docker Hub.
//
// A Keyring is read-only once built and safe for concurrent Lookups. It
// prints as its registry keys only.
type Keyring struct {
	entries []keyEntry
}

type keyEntry struct {
	labels []string // host labels, lower case, may hold globs
	port   string
	path   string
	globs  int // labels holding a glob: fewer is more specific
	order  int // insertion order, the last tie-break
	cred   Credential
}

// NewKeyring returns an empty keyring.
func NewKeyring() *Keyring { return &Keyring{} }

// AddSecret adds the logins of an image pull secret given by its type and
// data. Other secret types are an error. Bad entries are skipped and
// reported in the error; good ones are kept.
func (k *Keyring) AddSecret(secretType string, data map[string][]byte) error {
	switch secretType {
	case SecretTypeDockerConfigJSON:
		return k.AddDockerConfigJSON(data[DockerConfigJSONKey])
	case SecretTypeDockercfg:
		return k.AddDockercfg(data[DockercfgKey])
	}
	return fmt.Errorf("%w: secret type %q is not an image pull secret type", ErrMalformedDockerConfig, secretType)
}

// AddDockerConfigJSON adds the logins of kubernetes.io/dockerconfigjson
// content ({"auths": {...}}).
func (k *Keyring) AddDockerConfigJSON(data []byte) error {
	creds, err := parseDockerConfigJSON(data)
	return errors.Join(k.add(creds), err)
}

// AddDockercfg adds the logins of kubernetes.io/dockercfg content (a
// top-level map of registries).
func (k *Keyring) AddDockercfg(data []byte) error {
	creds, err := parseDockercfg(data)
	return errors.Join(k.add(creds), err)
}

// Add adds logins directly, e.g. from another keyring's source.
func (k *Keyring) Add(creds ...Credential) error { return k.add(creds) }

func (k *Keyring) add(creds []Credential) error {
	var errs []error
	for _, c := range creds {
		e, err := newKeyEntry(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.order = len(k.entries)
		k.entries = append(k.entries, e)
	}
	slices.SortStableFunc(k.entries, moreSpecific)
	return errors.Join(errs...)
}

// MergeKeyrings returns a keyring with the logins of all rings; for equally
// specific keys, earlier rings' logins are tried first.
func MergeKeyrings(rings ...*Keyring) *Keyring {
	m := NewKeyring()
	for _, r := range rings {
		if r == nil {
			continue
		}
		for _, e := range r.entries {
			e.order = len(m.entries)
			m.entries = append(m.entries, e)
		}
	}
	slices.SortStableFunc(m.entries, moreSpecific)
	return m
}

// Len is the number of logins held.
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	return len(k.entries)
}

// Lookup returns the logins that apply to ref, most specific key first
// (longer path, then fewer globs, then insertion order), without
// duplicates. An empty result means: pull anonymously.
func (k *Keyring) Lookup(ref imageref.Reference) []Credential {
	if k == nil || ref.IsZero() {
		return nil
	}
	host, port := splitHostPort(ref.Domain())
	labels := strings.Split(host, ".")
	repoPath := "/" + ref.Path()
	var out []Credential
	for _, e := range k.entries {
		if e.matches(labels, port, repoPath) && !hasLogin(out, e.cred) {
			out = append(out, e.cred)
		}
	}
	return out
}

func (e keyEntry) matches(labels []string, port, repoPath string) bool {
	if e.port != port || len(e.labels) != len(labels) || !strings.HasPrefix(repoPath, e.path) {
		return false
	}
	for i, g := range e.labels {
		if ok, err := path.Match(g, labels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func hasLogin(creds []Credential, c Credential) bool {
	return slices.ContainsFunc(creds, func(o Credential) bool {
		return o.Username == c.Username && o.Password == c.Password
	})
}

// moreSpecific orders entries: longer path, fewer globs, earlier insertion.
func moreSpecific(a, b keyEntry) int {
	if len(a.path) != len(b.path) {
		return len(b.path) - len(a.path)
	}
	if a.globs != b.globs {
		return a.globs - b.globs
	}
	return a.order - b.order
}

// newKeyEntry parses a registry key, "[scheme://]host[:port][/path]",
// into its matching parts.
func newKeyEntry(c Credential) (keyEntry, error) {
	key := strings.TrimSpace(c.Registry)
	for _, scheme := range []string{"https://", "http://"} {
		if len(key) >= len(scheme) && strings.EqualFold(key[:len(scheme)], scheme) {
			key = key[len(scheme):]
		}
	}
	hostport, keyPathPart := key, ""
	if i := strings.IndexByte(key, '/'); i >= 0 {
		hostport, keyPathPart = key[:i], key[i:]
	}
	if hostport == "" || strings.ContainsAny(hostport, "@ \t\n") {
		return keyEntry{}, fmt.Errorf("%w: registry %s is not a host[:port][/path]", ErrMalformedDockerConfig, quoteKey(c.Registry))
	}
	host, port := splitHostPort(hostport)
	if port == "" && dockerHubAliases[host] {
		host = "docker.io"
	}
	e := keyEntry{labels: strings.Split(host, "."), port: port, path: keyPath(keyPathPart), cred: c}
	for _, l := range e.labels {
		if strings.ContainsAny(l, "*?[") {
			e.globs++
		}
	}
	return e, nil
}

// keyPath drops the docker client's API version prefix, which means "the
// whole host".
func keyPath(p string) string {
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[3:]
	}
	if p == "/" {
		return ""
	}
	return p
}

// splitHostPort splits "host[:port]", IPv6 hosts in brackets, and
// lower-cases the host: DNS names are case-insensitive. Keys and image
// domains go through the same function, so they compare alike.
func splitHostPort(hostport string) (string, string) {
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		if i := strings.LastIndexByte(hostport, ']'); i > 0 {
			host, port = hostport[1:i], strings.TrimPrefix(hostport[i+1:], ":")
		}
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
	}
	return strings.ToLower(host), port
}

// String lists the registry keys only.
func (k *Keyring) String() string {
	if k == nil {
		return "Keyring{}"
	}
	keys := make([]string, len(k.entries))
	for i, e := range k.entries {
		keys[i] = redactUserinfo(e.cred.Registry)
	}
	return fmt.Sprintf("Keyring{%q}", keys)
}

// GoString keeps %#v as safe as %v.
func (k *Keyring) GoString() string { return "pullengine." + k.String() }

// Format makes every verb print the keys-only form.
func (k *Keyring) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, k.GoString())
		return
	}
	_, _ = io.WriteString(f, k.String())
}

// MarshalLog is what logr sinks print for a Keyring.
func (k *Keyring) MarshalLog() any { return k.String() }
