package main

import (
	"context"
	"os"
	"sync/atomic"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/warmer-dev/warmer/pkg/kubeletstats"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// kubeletFlags say where the agent reads its node's image filesystem
// level: the kubelet's Summary API, so that the agent mounts none of the
// runtime's state. The names follow metrics-server's, which reads the same
// endpoint.
type kubeletFlags struct {
	address  string
	port     int
	caFile   string
	insecure bool
}

func (k *kubeletFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&k.address, "kubelet-address", os.Getenv("HOST_IP"), "Address of this node's kubelet, whose /stats/summary gives the image filesystem's level to the disk guard (default $HOST_IP; in a DaemonSet, status.hostIP from the downward API). Empty: the guard measures the runtime's image filesystem with statfs, which needs that path visible to the agent.")
	fs.IntVar(&k.port, "kubelet-port", kubeletstats.DefaultPort, "HTTPS port of the kubelet.")
	fs.StringVar(&k.caFile, "kubelet-certificate-authority", "", "PEM bundle that signs the kubelet's serving certificate; empty: the cluster's CA, as for the API server.")
	fs.BoolVar(&k.insecure, "kubelet-insecure-tls", false, "Do not verify the kubelet's serving certificate. The agent's token then goes to whoever answers on the node's address: use only where kubelets have self-signed certificates and the node network is trusted.")
}

func (k *kubeletFlags) validate() error {
	switch {
	case k.port < 1 || k.port > 65535:
		return usagef("--kubelet-port must be between 1 and 65535, got %d", k.port)
	case k.insecure && k.caFile != "":
		return usagef("--kubelet-insecure-tls and --kubelet-certificate-authority exclude each other")
	}
	return nil
}

// imageFsReader returns the disk guard's source of figures, or nil when
// no kubelet address is set.
func (k *kubeletFlags) imageFsReader(cfg *rest.Config) (pullengine.ImageFsReader, error) {
	if k.address == "" {
		return nil, nil
	}
	c, err := kubeletstats.New(cfg, k.address, kubeletstats.Options{Port: k.port, CAFile: k.caFile, InsecureSkipVerify: k.insecure})
	if err != nil {
		return nil, err
	}
	return &kubeletImageFs{client: c}, nil
}

// kubeletImageFs feeds the kubelet's figures to the disk guard and says
// once, at the default log level, when they stop or start coming, since
// the guard then falls back to statfs (or sees nothing at all in a Pod).
type kubeletImageFs struct {
	client  *kubeletstats.Client
	failing atomic.Bool
}

var _ pullengine.ImageFsReader = &kubeletImageFs{}

// ReadImageFs implements pullengine.ImageFsReader.
func (k *kubeletImageFs) ReadImageFs(ctx context.Context) (pullengine.FsStats, error) {
	st, err := k.client.ImageFs(ctx)
	log := ctrl.LoggerFrom(ctx)
	if err != nil {
		if !k.failing.Swap(true) {
			log.Info("Image filesystem level not read from the kubelet; the disk guard falls back to statfs on the runtime's mountpoint", "error", err.Error())
		}
		return pullengine.FsStats{}, err
	}
	if k.failing.Swap(false) {
		log.Info("Image filesystem level read from the kubelet again")
	}
	return pullengine.FsStats{CapacityBytes: st.CapacityBytes, AvailableBytes: st.AvailableBytes, UsedBytes: st.UsedBytes}, nil
}
