package criclient

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	criutil "k8s.io/cri-client/pkg/util"
)

// DefaultSockets are the sockets CRI runtimes usually listen on, in the order
// Discover tries them. The /var/run variants matter on hosts (or in pods)
// where /var/run is a separate mount rather than a link to /run.
var DefaultSockets = []string{
	"/run/containerd/containerd.sock",
	"/var/run/containerd/containerd.sock",
	"/run/crio/crio.sock",
	"/var/run/crio/crio.sock",
	"/run/cri-dockerd.sock",
	"/var/run/cri-dockerd.sock",
}

// Discover returns, as a unix:// endpoint, the first path in candidates that
// exists and is a socket. Whether a runtime answers there is checked later,
// by New's Version call.
func Discover(candidates []string) (string, error) {
	for _, p := range candidates {
		fi, err := os.Stat(p)
		if err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix://" + p, nil
		}
	}
	return "", fmt.Errorf("%w (tried %s)", errNoEndpoint, strings.Join(candidates, ", "))
}

// dialerFor resolves an endpoint ("unix:///path" or "/path") to a socket
// path and a dialer, the kubelet's way (cri-client's util), and insists on
// an absolute path: a relative one would depend on the agent's directory.
func dialerFor(endpoint string) (string, func(context.Context, string) (net.Conn, error), error) {
	addr, dialer, err := criutil.GetAddressAndDialer(endpoint)
	if err != nil {
		return "", nil, fmt.Errorf("%w %q: %w", ErrInvalidEndpoint, endpoint, err)
	}
	if !filepath.IsAbs(addr) {
		return "", nil, fmt.Errorf("%w %q: want unix:///absolute/path or /absolute/path", ErrInvalidEndpoint, endpoint)
	}
	return addr, dialer, nil
}
