package pullengine

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/warmer-dev/warmer/internal/truncate"
)

// Secret types and data keys of image pull secrets, as plain strings: this
// package stays free of Kubernetes API types.
const (
	SecretTypeDockerConfigJSON = "kubernetes.io/dockerconfigjson"
	SecretTypeDockercfg        = "kubernetes.io/dockercfg"
	DockerConfigJSONKey        = ".dockerconfigjson"
	DockercfgKey               = ".dockercfg"
)

// ErrMalformedDockerConfig is returned (wrapped) for content that is not a
// docker config. Its messages never quote the content: it holds secrets.
var ErrMalformedDockerConfig = errors.New("malformed docker config")

// dockerConfigEntry is one registry's login; unknown fields (email,
// identitytoken, ...) are ignored, as the kubelet does.
type dockerConfigEntry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// parseDockerConfigJSON reads kubernetes.io/dockerconfigjson content:
// {"auths": {"<registry>": {...}}}.
func parseDockerConfigJSON(data []byte) ([]Credential, error) {
	var doc struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, jsonError(err)
	}
	return parseEntries(doc.Auths)
}

// parseDockercfg reads kubernetes.io/dockercfg content: the legacy format,
// a top-level map {"<registry>": {...}}.
func parseDockercfg(data []byte) ([]Credential, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, jsonError(err)
	}
	return parseEntries(doc)
}

// parseEntries turns each registry's entry into a Credential. A bad entry is
// skipped and reported; the others are kept. Entries with no login at all
// are skipped silently: they would pull anonymously anyway.
func parseEntries(raw map[string]json.RawMessage) ([]Credential, error) {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	// Reverse order, as the kubelet's index: deterministic, and longer
	// paths of one host come first.
	slices.Sort(keys)
	slices.Reverse(keys)
	var creds []Credential
	var errs []error
	for _, k := range keys {
		c, ok, err := parseEntry(k, raw[k])
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			creds = append(creds, c)
		}
	}
	return creds, errors.Join(errs...)
}

func parseEntry(registry string, raw json.RawMessage) (Credential, bool, error) {
	var e dockerConfigEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return Credential{}, false, fmt.Errorf("registry %s: %w", quoteKey(registry), jsonError(err))
	}
	c := Credential{Registry: registry, Username: e.Username, Password: e.Password}
	if e.Auth != "" {
		user, pass, err := decodeAuth(e.Auth)
		if err != nil {
			return Credential{}, false, fmt.Errorf("registry %s: %w", quoteKey(registry), err)
		}
		c.Username, c.Password = user, pass
	}
	return c, c.Username != "" || c.Password != "", nil
}

// decodeAuth splits the "auth" field, base64("user:password"), padded or
// not. Its errors name no part of the field.
func decodeAuth(field string) (string, string, error) {
	field = strings.TrimSpace(field)
	enc := base64.RawStdEncoding
	if strings.HasSuffix(field, "=") {
		enc = base64.StdEncoding
	}
	b, err := enc.DecodeString(field)
	if err != nil {
		return "", "", fmt.Errorf("%w: auth is not base64", ErrMalformedDockerConfig)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", fmt.Errorf("%w: auth is not base64(username:password)", ErrMalformedDockerConfig)
	}
	return user, pass, nil
}

// jsonError describes a decoding failure by position only: encoding/json's
// own messages may quote pieces of the input.
func jsonError(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("%w: invalid JSON at byte %d", ErrMalformedDockerConfig, syn.Offset)
	}
	return fmt.Errorf("%w: unexpected JSON structure", ErrMalformedDockerConfig)
}

// quoteKey shows a registry key in an error, bounded in length and without
// any "user:password@" a careless key may carry.
func quoteKey(k string) string {
	return fmt.Sprintf("%q", truncate.String(redactUserinfo(k), 256))
}

func redactUserinfo(k string) string {
	if i := strings.LastIndexByte(k, '@'); i >= 0 {
		return redacted + k[i:]
	}
	return k
}
