package testbed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
)

// nodeRuntime is what makes a Containerd the runtime of a real node:
// containerd 2.x from the node's assets, running pods with runc.
type nodeRuntime struct {
	// assets is the folder with containerd, its runc shim and ctr.
	assets string
	// pause is the sandbox image, imported rather than pulled.
	pause string
}

// withNodeRuntime makes the containerd a real node's runtime.
func withNodeRuntime(assets, pause string) ContainerdOption {
	return func(c *Containerd) { c.node = &nodeRuntime{assets: assets, pause: pause} }
}

// WithContainerd2 runs the real node's containerd 2.x (from NodeAssetsEnv)
// instead of Debian's 1.6, without a kubelet: for what only 2.x does, such
// as reporting the images pinned through its images API.
func WithContainerd2(t TB) ContainerdOption {
	t.Helper()
	return withNodeRuntime(nodeAssets(t), PauseImage)
}

// ContainerdVersion is one containerd a test runs against: Debian's 1.6,
// or the real node's 2.x.
type ContainerdVersion struct {
	Name string
	// Options start that containerd (StartContainerd).
	Options func(t TB) []ContainerdOption
}

// ContainerdVersions are the two containerds of the test bed, for a test
// of what both must do.
func ContainerdVersions() []ContainerdVersion {
	return []ContainerdVersion{
		{"containerd 1.6", func(TB) []ContainerdOption { return nil }},
		{"containerd 2", func(t TB) []ContainerdOption { return []ContainerdOption{WithContainerd2(t)} }},
	}
}

// cniPluginDir is where Debian's containernetworking-plugins puts the
// plugins.
const cniPluginDir = "/usr/lib/cni"

// nodeConfig is containerd 2.x's configuration for a real node. Every path
// it would otherwise take from the host (state, shim sockets, network
// namespaces, CNI, CDI, NRI, registry hosts) lies in the instance's own
// directory, so nothing is left outside it and several can run side by side.
func (c *Containerd) nodeConfig() string {
	d := func(p string) string { return filepath.Join(c.Dir, p) }
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
# Snapshotters that cannot work here add noise to the log; NRI would listen
# on a socket of the host's (/var/run/nri).
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.nri.v1.nri"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

# Shims put their sockets in /run/containerd/s unless told otherwise.
[plugins."io.containerd.shim.v1.manager"]
  socket_dir = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = %[6]q
  stats_collect_period = 1
%[14]s  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[7]q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[8]q

[plugins."io.containerd.cri.v1.runtime"]
  # Root here may lack CAP_SYS_RESOURCE: runc could not lower a container's
  # oom_score_adj below containerd's own, and every sandbox would fail.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [%[9]q]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # runc keeps its state in /run/containerd/runc unless told otherwise.
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        Root = %[13]q
  [plugins."io.containerd.cri.v1.runtime".cni]
    conf_dir = %[10]q
    bin_dirs = [%[11]q]
%[12]s`, d("root"), d("state"), c.Socket, d("opt"), d("s"), snapshotter(), c.node.pause,
		d("certs.d"), d("cdi"), d("cni/conf"), cniPluginDir, c.unpackConfig(), d("runc"), c.discardLine()) + c.transferConfig()
}

// transferConfig is the transfer service's table with the settings
// WithTransferSettings gave, if any.
func (c *Containerd) transferConfig() string {
	if len(c.transfer) == 0 {
		return ""
	}
	return "\n[plugins.\"io.containerd.transfer.v1.local\"]\n  " + strings.Join(c.transfer, "\n  ") + "\n"
}

// discardLine sets discard_unpacked_layers only when asked: containerd
// 2.1+ then pulls for CRI without its transfer service, so the line is
// left out otherwise.
func (c *Containerd) discardLine() string {
	if !c.discard {
		return ""
	}
	return "  discard_unpacked_layers = true\n"
}

// unpackConfig tells containerd's transfer service (which ctr import and
// CRI pulls go through) to unpack into the CRI's snapshotter when that is
// not the default overlayfs.
func (c *Containerd) unpackConfig() string {
	if snapshotter() == "overlayfs" {
		return ""
	}
	return fmt.Sprintf(`
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/%s"
  snapshotter = %q
`, goruntime.GOARCH, snapshotter())
}

// cniConfig is the node's one network. Pods in the test bed use the host's
// network (hostNetwork: true), so no plugin ever runs for them; but a node is
// Ready only once its runtime has a network configuration. A loopback-only
// network makes no host change should a pod without hostNetwork come.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "warmer-testbed",
  "plugins": [{"type": "loopback"}]
}
`

// writeNodeFiles writes what a node's containerd reads besides its config.
func (c *Containerd) writeNodeFiles() error {
	for _, dir := range []string{"s", "cdi", "certs.d", "runc"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, dir), 0o700); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(c.Dir, "cni/conf/10-warmer-testbed.conflist"), []byte(cniConfig), 0o644)
}

// Ctr runs ctr against this containerd with the given arguments (say
// "-n", "k8s.io", "images", "ls") and returns its standard output; the
// error carries its standard error.
func (c *Containerd) Ctr(args ...string) (string, error) {
	bin := "ctr"
	if c.node != nil {
		bin = filepath.Join(c.node.assets, "ctr")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--address", c.Socket}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

// ImportImage imports an image tarball (docker or OCI archive, as
// go-containerregistry's tarball.Write or `make image` write them) into the
// namespace the kubelet uses, unpacked and ready to run.
func (c *Containerd) ImportImage(tarPath string) error {
	_, err := c.Ctr("-n", "k8s.io", "images", "import", "--snapshotter", snapshotter(), tarPath)
	return err
}
