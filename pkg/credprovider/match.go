package credprovider

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
)

// pattern is one matchImages entry: "host[:port][/path]", where each
// host label may be a glob.
type pattern struct {
	labels []string
	port   string
	path   string
}

// parsePattern reads a matchImages entry the way the kubelet does: as the
// host, port and path of "https://" + s.
func parsePattern(s string) (pattern, error) {
	u, err := url.Parse("https://" + s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return pattern{}, fmt.Errorf("%q is not a host[:port][/path] pattern", s)
	}
	labels, port := splitHost(u.Host)
	for _, l := range labels {
		if _, err := path.Match(l, ""); err != nil {
			return pattern{}, fmt.Errorf("%q: bad glob in host label %q", s, l)
		}
	}
	return pattern{labels: labels, port: port, path: u.Path}, nil
}

// splitHost splits "host[:port]" into lower-case labels and the port.
func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(strings.ToLower(host), "."), port
}

// matches says whether an image repository, "host[:port]/path" without
// tag or digest, falls under the pattern: as many host labels, each
// matching its glob; the same port (none matches none only); the
// pattern's path a prefix of the image's.
func (p pattern) matches(image string) bool {
	u, err := url.Parse("https://" + image)
	if err != nil {
		return false
	}
	labels, port := splitHost(u.Host)
	if port != p.port || len(labels) != len(p.labels) || !strings.HasPrefix(u.Path, p.path) {
		return false
	}
	for i, g := range p.labels {
		if ok, _ := path.Match(g, labels[i]); !ok {
			return false
		}
	}
	return true
}

// registryOf is the "host[:port]" part of an image repository: the
// Registry cache key.
func registryOf(image string) string {
	host, _, _ := strings.Cut(image, "/")
	return host
}
