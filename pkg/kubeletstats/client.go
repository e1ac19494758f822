package kubeletstats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
)

// DefaultPort is the kubelet's default HTTPS port.
const DefaultPort = 10250

// maxSummaryBytes bounds the summary read: it grows with the node's pods
// and volumes (a few hundred KiB on a full node), never near this.
const maxSummaryBytes = 32 << 20

// Options say how to reach the kubelet.
type Options struct {
	// Port is the kubelet's HTTPS port; 0 means DefaultPort.
	Port int
	// CAFile is a PEM bundle that signs the kubelet's serving certificate;
	// empty means the CA that the credentials trust for the API server.
	CAFile string
	// InsecureSkipVerify accepts any serving certificate. The token is then
	// sent to whoever answers on the node's address.
	InsecureSkipVerify bool
	// Timeout bounds each request; 0 means 10 s.
	Timeout time.Duration
}

// FsStats is a filesystem's size and use, in bytes.
type FsStats struct {
	CapacityBytes  uint64
	AvailableBytes uint64
	// UsedBytes is what the images take on it, as the runtime counts them.
	UsedBytes uint64
}

// Client reads one kubelet's summary.
type Client struct {
	url  string
	http *http.Client
}

// New returns a client for the kubelet at address (an IP or a host name,
// without a port) that authenticates with creds' credentials: a bearer
// token or token file, a client certificate. creds' host, TLS server
// settings and impersonation are not used.
func New(creds *rest.Config, address string, opts Options) (*Client, error) {
	if address == "" {
		return nil, errors.New("kubeletstats: no kubelet address")
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	cfg := rest.CopyConfig(creds)
	cfg.Host = "https://" + net.JoinHostPort(address, strconv.Itoa(opts.Port))
	cfg.APIPath = ""
	cfg.Impersonate = rest.ImpersonationConfig{}
	cfg.Timeout = opts.Timeout
	cfg.ServerName = ""
	switch {
	case opts.InsecureSkipVerify:
		cfg.Insecure, cfg.CAFile, cfg.CAData = true, "", nil
	case opts.CAFile != "":
		cfg.CAFile, cfg.CAData = opts.CAFile, nil
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeletstats: %w", err)
	}
	return &Client{url: cfg.Host + "/stats/summary", http: hc}, nil
}

// summary is the part of the Summary API's answer that is read.
type summary struct {
	Node struct {
		Runtime *struct {
			ImageFs *struct {
				CapacityBytes  *uint64 `json:"capacityBytes"`
				AvailableBytes *uint64 `json:"availableBytes"`
				UsedBytes      *uint64 `json:"usedBytes"`
			} `json:"imageFs"`
		} `json:"runtime"`
	} `json:"node"`
}

// ImageFs returns the node's image filesystem as the kubelet reports it
// (node.runtime.imageFs).
func (c *Client) ImageFs(ctx context.Context) (FsStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return FsStats{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return FsStats{}, fmt.Errorf("reading the kubelet's summary: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The kubelet's refusals name the user and the attribute checked
		// (e.g. "Forbidden (user=..., verb=get, resource=nodes,
		// subresource(s)=[stats])"): worth passing on, and free of secrets.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return FsStats{}, fmt.Errorf("reading the kubelet's summary at %s: %s: %s", c.url, resp.Status, msg)
	}
	var s summary
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSummaryBytes)).Decode(&s); err != nil {
		return FsStats{}, fmt.Errorf("decoding the kubelet's summary: %w", err)
	}
	fs := s.Node.Runtime
	if fs == nil || fs.ImageFs == nil || fs.ImageFs.CapacityBytes == nil || fs.ImageFs.AvailableBytes == nil || *fs.ImageFs.CapacityBytes == 0 {
		return FsStats{}, errors.New("the kubelet's summary has no image filesystem capacity (node.runtime.imageFs)")
	}
	out := FsStats{CapacityBytes: *fs.ImageFs.CapacityBytes, AvailableBytes: *fs.ImageFs.AvailableBytes}
	if fs.ImageFs.UsedBytes != nil {
		out.UsedBytes = *fs.ImageFs.UsedBytes
	}
	return out, nil
}
