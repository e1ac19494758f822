package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Containerd is one containerd process with its CRI plugin, standing in for
// one node's container runtime. Each has its own root, state, socket and temp
// directory, so several run side by side.
type Containerd struct {
	// Name is the simulated node's name.
	Name string
	// Dir holds everything the instance writes.
	Dir string
	// Socket is the path of the gRPC socket; Endpoint is it as a URL.
	Socket, Endpoint string

	t       TB
	proc    *process
	mirrors map[string]string
	// discard empties the content store of an image's layers once
	// they are unpacked (WithDiscardUnpackedLayers).
	discard bool
	// transfer holds settings of containerd 2.x's transfer service
	// (WithTransferSettings).
	transfer []string
	// node, when set, makes this the containerd 2.x of a real node: it runs
	// pods, not only pulls (see node_containerd.go).
	node *nodeRuntime
	// unpackHold, when set, holds each gzip layer's unpack while that
	// file exists (WithUnpackHold).
	unpackHold string
}

// ContainerdOption adjusts a containerd before it starts.
type ContainerdOption func(*Containerd)

// WithMirror serves every pull from registry (say "docker.io") from the test
// registry at host instead. The real registry is never contacted, so the
// sandbox can show familiar references without any traffic off the machine.
func WithMirror(registry, host string) ContainerdOption {
	return func(c *Containerd) {
		if c.mirrors == nil {
			c.mirrors = map[string]string{}
		}
		c.mirrors[registry] = host
	}
}

// WithDiscardUnpackedLayers sets the CRI plugin's discard_unpacked_layers,
// as clouds that trade the content store's disk for a re-fetch do: once
// an image is unpacked, its compressed layers leave the content store.
func WithDiscardUnpackedLayers() ContainerdOption {
	return func(c *Containerd) { c.discard = true }
}

// WithTransferSettings sets keys of containerd 2.x's transfer service
// (plugins."io.containerd.transfer.v1.local"), which CRI pulls go
// through, each a TOML line such as "max_concurrent_unpacks = 2"; a
// containerd 1.6 has no such service and ignores them.
func WithTransferSettings(lines ...string) ContainerdOption {
	return func(c *Containerd) { c.transfer = append(c.transfer, lines...) }
}

// StartContainerd starts a containerd for the named node and waits until its
// CRI answers Version. It is stopped, and its mounts and files removed, at
// cleanup.
func StartContainerd(t TB, node string, opts ...ContainerdOption) *Containerd {
	t.Helper()
	c := &Containerd{Name: node, Dir: shortDir(t, "ctd"), t: t}
	for _, o := range opts {
		o(c)
	}
	c.Socket = filepath.Join(c.Dir, "c.sock")
	if c.node != nil {
		// As on a node, the socket lies in the state directory, beside the
		// containers' root filesystem mounts: a DaemonSet mounting the
		// runtime's directory sees what it would see on a node.
		c.Socket = filepath.Join(c.StateDir(), "containerd.sock")
	}
	c.Endpoint = "unix://" + c.Socket
	for _, d := range []string{"root", "state", "opt", "tmp", "cni/conf", "cni/bin"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "config.toml"), []byte(c.config()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.writeMirrors(); err != nil {
		t.Fatal(err)
	}
	if c.node != nil {
		if err := c.writeNodeFiles(); err != nil {
			t.Fatal(err)
		}
	}
	c.Start()
	t.Cleanup(c.Stop)
	return c
}

// Start (re)starts containerd and waits for its CRI to answer.
func (c *Containerd) Start() {
	c.t.Helper()
	c.start(c.t)
}

// start is Start, failing t when containerd does not answer; the
// process is stopped by the cleanup StartContainerd registered.
func (c *Containerd) start(t TB) {
	t.Helper()
	bin, env := c.binary()
	path, err := c.unpackHoldPath(pathOf(env))
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "PATH="+path)
	// Temp mounts made while unpacking layers land in TMPDIR: keep them
	// inside Dir so cleanup finds them even after a kill.
	env = append(env, "TMPDIR="+filepath.Join(c.Dir, "tmp"))
	c.proc = startCRIRuntime(t, "containerd "+c.Name, filepath.Join(c.Dir, "containerd.log"), env, "unix://"+c.Socket,
		bin, "--config", filepath.Join(c.Dir, "config.toml"))
}

// startCRIRuntime starts a container runtime and waits until its CRI at
// endpoint answers Version: the socket appears before the CRI service is
// usable (and stays even when it failed), so only an answer counts.
func startCRIRuntime(t TB, name, logPath string, env []string, endpoint string, argv ...string) *process {
	t.Helper()
	p, err := startProcess(name, logPath, env, argv...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitFor(ctx, p, "CRI Version answer", func(ctx context.Context) error { return criVersion(ctx, endpoint) }); err != nil {
		p.kill()
		t.Fatal(err)
	}
	return p
}

// binary is the containerd to run and what its environment needs: Debian's
// by default, the node's 2.x with its shim on PATH for a real node.
func (c *Containerd) binary() (string, []string) {
	if c.node != nil {
		return filepath.Join(c.node.assets, "containerd"), []string{"PATH=" + c.node.assets + ":" + os.Getenv("PATH")}
	}
	bin, err := lookPath("containerd")
	if err != nil {
		c.t.Fatal(err)
	}
	return bin, nil
}

// Stop stops containerd gracefully (SIGTERM, then SIGKILL after 10 s).
func (c *Containerd) Stop() {
	if c.proc != nil {
		c.proc.stop(10 * time.Second)
	}
}

// Kill kills containerd at once, as a crash would.
func (c *Containerd) Kill() {
	if c.proc != nil {
		c.proc.kill()
	}
}

// Snapshotter is the snapshotter its CRI plugin unpacks images with; a
// client that unpacks for it (ctr images import) must name the same one.
func (c *Containerd) Snapshotter() string { return snapshotter() }

// StateDir is the containerd's state directory (/run/containerd on a
// node), where its socket lies for a real node.
func (c *Containerd) StateDir() string { return filepath.Join(c.Dir, "state") }

// Log returns the last lines of containerd's log.
func (c *Containerd) Log(lines int) string {
	return tailFile(filepath.Join(c.Dir, "containerd.log"), lines)
}

// ImageService returns a raw CRI image client for the test's own checks
// (what the agent pulled, removing an image by hand). It is closed at cleanup.
func (c *Containerd) ImageService(t TB) runtimeapi.ImageServiceClient {
	t.Helper()
	conn := c.dial(t)
	return runtimeapi.NewImageServiceClient(conn)
}

// RuntimeService returns a raw CRI runtime client (pod sandboxes and
// containers, for a real node). It is closed at cleanup.
func (c *Containerd) RuntimeService(t TB) runtimeapi.RuntimeServiceClient {
	t.Helper()
	return runtimeapi.NewRuntimeServiceClient(c.dial(t))
}

func (c *Containerd) dial(t TB) *grpc.ClientConn {
	t.Helper()
	return dialCRI(t, "unix://"+c.Socket)
}

// dialCRI connects to a runtime's CRI socket at endpoint; the connection
// is closed at cleanup.
func dialCRI(t TB, endpoint string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dialling %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// criVersion asks the runtime at endpoint for its version, within a second.
func criVersion(ctx context.Context, endpoint string) error {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

func (c *Containerd) config() string {
	if c.node != nil {
		return c.nodeConfig()
	}
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Snapshotters that cannot work here only add noise to the log.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  # ImageFsInfo is refreshed this often (seconds); the default is 10.
  stats_collect_period = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = %[5]q
%[8]s  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = %[6]q
    bin_dir = %[7]q
`, filepath.Join(c.Dir, "root"), filepath.Join(c.Dir, "state"), c.Socket, filepath.Join(c.Dir, "opt"),
		snapshotter(), filepath.Join(c.Dir, "cni/conf"), filepath.Join(c.Dir, "cni/bin"), c.discardLine()) + c.registryConfig()
}

// registryConfig points the CRI plugin at per-registry hosts.toml files,
// only when mirrors are asked for: without it, loopback registries are
// reached over plain HTTP by default.
func (c *Containerd) registryConfig() string {
	if len(c.mirrors) == 0 {
		return ""
	}
	return fmt.Sprintf("  [plugins.\"io.containerd.grpc.v1.cri\".registry]\n    config_path = %q\n", filepath.Join(c.Dir, "certs.d"))
}

func (c *Containerd) writeMirrors() error {
	for registry, host := range c.mirrors {
		dir := filepath.Join(c.Dir, "certs.d", registry)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// server is the mirror itself: no fallback to the real registry.
		conf := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host, "http://"+host)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(conf), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var (
	snapshotterOnce sync.Once
	snapshotterName string
)

// snapshotter is overlayfs when this machine can mount an overlay, and the
// slower but always available native snapshotter otherwise.
func snapshotter() string {
	snapshotterOnce.Do(func() {
		snapshotterName = "native"
		dir, err := os.MkdirTemp("/tmp", "wb-ovl-")
		if err != nil {
			return
		}
		defer os.RemoveAll(dir)
		for _, d := range []string{"l", "u", "w", "m"} {
			_ = os.Mkdir(filepath.Join(dir, d), 0o755)
		}
		opts := fmt.Sprintf("lowerdir=%s/l,upperdir=%s/u,workdir=%s/w", dir, dir, dir)
		if syscall.Mount("overlay", filepath.Join(dir, "m"), "overlay", 0, opts) == nil {
			_ = syscall.Unmount(filepath.Join(dir, "m"), 0)
			snapshotterName = "overlayfs"
		}
	})
	return snapshotterName
}
