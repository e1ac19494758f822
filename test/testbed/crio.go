package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// CRIOAssetsEnv names the folder with crio and pinns
// (hack/install-crio.sh prints it); unset, the tests run the script.
const CRIOAssetsEnv = "WARMER_CRIO_ASSETS"

// CRIO is one CRI-O process, standing in for a node's runtime the way
// Containerd does: its own root, run root, socket and configuration in a
// temporary folder, images in the vfs driver (no mount; see
// WithOverlayStorage), runc through Debian's conmon, loopback registries
// over plain HTTP (CRI-O's default for 127.0.0.0/8), every signature
// accepted.
type CRIO struct {
	// Name is the simulated node's name.
	Name string
	// Dir holds everything the instance writes.
	Dir string
	// Socket is the path of the gRPC socket; Endpoint is it as a URL.
	Socket, Endpoint string

	t      TB
	proc   *process
	pinned []string
	pause  string
	driver string
}

// CRIOOption adjusts a CRI-O before it starts.
type CRIOOption func(*CRIO)

// WithPinnedImages sets CRI-O's pinned_images: CRI-O pins by its own
// configuration, and reports those images pinned over CRI.
func WithPinnedImages(refs ...string) CRIOOption {
	return func(c *CRIO) { c.pinned = append(c.pinned, refs...) }
}

// WithPauseImage sets CRI-O's pause_image, which every pod sandbox needs
// in storage even with no infra process (CRI-O pulls it at the first
// RunPodSandbox when absent): a reference the bed can serve, such as the
// stand-in of ./test/testbed/pause pushed to a test registry.
func WithPauseImage(ref string) CRIOOption {
	return func(c *CRIO) { c.pause = ref }
}

// WithOverlayStorage keeps images in the overlay driver instead of vfs:
// CRI-O mounts an image volume (of an image; an artifact's blobs are
// bind-mounted files) with mount options, which vfs refuses.
func WithOverlayStorage() CRIOOption {
	return func(c *CRIO) { c.driver = "overlay" }
}

// StartCRIO starts a CRI-O for the named node and waits until its CRI
// answers Version. It is stopped, and its files removed, at cleanup.
func StartCRIO(t TB, node string, opts ...CRIOOption) *CRIO {
	t.Helper()
	assets := crioAssets(t)
	c := &CRIO{Name: node, Dir: shortDir(t, "crio"), t: t, driver: "vfs"}
	for _, o := range opts {
		o(c)
	}
	c.Socket = filepath.Join(c.Dir, "crio.sock")
	c.Endpoint = "unix://" + c.Socket
	for _, d := range []string{"etc/cni", "etc/policies", "etc/registries.d", "tmp", "cni-bin"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/crio.conf":       c.config(assets),
		"etc/policy.json":     `{"default":[{"type":"insecureAcceptAnything"}]}`,
		"etc/registries.conf": "unqualified-search-registries = []\nshort-name-mode = \"disabled\"\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(c.Dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	crioHostPaths.acquire(t)
	c.Start()
	t.Cleanup(func() {
		c.Stop()
		crioHostPaths.release(t)
	})
	return c
}

// Start (re)starts CRI-O and waits for its CRI to answer.
func (c *CRIO) Start() {
	c.t.Helper()
	c.proc = startCRIRuntime(c.t, "crio "+c.Name, filepath.Join(c.Dir, "crio.log"), nil, c.Endpoint,
		filepath.Join(crioAssets(c.t), "crio"), "--config", filepath.Join(c.Dir, "etc/crio.conf"), "--config-dir", "",
		"--registries-conf", filepath.Join(c.Dir, "etc/registries.conf"), "--registries-conf-dir", filepath.Join(c.Dir, "etc/registries.d"))
}

// Stop stops CRI-O gracefully (SIGTERM, then SIGKILL after 10 s).
func (c *CRIO) Stop() {
	if c.proc != nil {
		c.proc.stop(10 * time.Second)
	}
}

// Log returns the last lines of CRI-O's log.
func (c *CRIO) Log(lines int) string { return tailFile(filepath.Join(c.Dir, "crio.log"), lines) }

// ImageService returns a raw CRI image client for the test's own checks.
// It is closed at cleanup.
func (c *CRIO) ImageService(t TB) runtimeapi.ImageServiceClient {
	t.Helper()
	return runtimeapi.NewImageServiceClient(c.dial(t))
}

// RuntimeService returns a raw CRI runtime client, to run pods and
// containers through CRI alone. It is closed at cleanup.
func (c *CRIO) RuntimeService(t TB) runtimeapi.RuntimeServiceClient {
	t.Helper()
	return runtimeapi.NewRuntimeServiceClient(c.dial(t))
}

// dial connects to CRI-O's socket; the connection is closed at cleanup.
func (c *CRIO) dial(t TB) *grpc.ClientConn {
	t.Helper()
	return dialCRI(t, c.Endpoint)
}

// config is CRI-O's configuration: every path it would write below /var,
// /etc or /run moved into Dir, runc as the one runtime, no NRI.
//
// drop_infra_ctr (CRI-O's default, said here because the bed needs it):
// a pod whose PID namespace is not shared (the kubelet's default, CRI
// NamespaceMode CONTAINER) gets no infra process. That process is the only
// one CRI-O gives a negative oom_score_adj (-998, a constant, no option);
// root here lacks CAP_SYS_RESOURCE, so runc's nsexec cannot write it
// ("failed to update /proc/self/oom_score_adj: Permission denied") and
// RunPodSandbox fails for a pod that shares its PID namespace.
// Containers get the request's oom_score_adj (none: unchanged), and
// conmon only logs the refusal of its own -1000.
func (c *CRIO) config(assets string) string {
	d := func(p string) string { return filepath.Join(c.Dir, p) }
	quoted := make([]string, len(c.pinned))
	for i, p := range c.pinned {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		c.t.Fatal("runc is not installed: run `make testbed`")
	}
	conmon, err := exec.LookPath("conmon")
	if err != nil {
		c.t.Fatal("conmon is not installed: run `make testbed`")
	}
	return fmt.Sprintf(`[crio]
root = %q
runroot = %q
storage_driver = %q
log_dir = %q
version_file = %q
version_file_persist = %q
clean_shutdown_file = %q
[crio.api]
listen = %q
[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon = %q
conmon_cgroup = "pod"
drop_infra_ctr = true
pinns_path = %q
container_exits_dir = %q
container_attach_socket_dir = %q
namespaces_dir = %q
decryption_keys_path = %q
irqbalance_config_file = %q
irqbalance_config_restore_file = "disable"
hooks_dir = []
cdi_spec_dirs = []
[crio.runtime.runtimes.runc]
runtime_path = %q
runtime_root = %q
monitor_path = %q
[crio.image]
signature_policy = %q
signature_policy_dir = %q
pinned_images = [%s]
%sbig_files_temporary_dir = %q
[crio.network]
network_dir = %q
plugin_dirs = [%q]
[crio.nri]
enable_nri = false
`, d("root"), d("runroot"), c.driver, d("logs"), d("lib/version"), d("lib/version-persist"), d("lib/clean.shutdown"),
		c.Socket, conmon, filepath.Join(assets, "pinns"), d("exits"), d("attach"), d("ns"), d("etc/keys"),
		d("etc/irqbalance"), runc, d("runc"), conmon, d("etc/policy.json"), d("etc/policies"),
		strings.Join(quoted, ", "), c.pauseLine(), d("tmp"), d("etc/cni"), d("cni-bin"))
}

// pauseLine is the pause_image setting, or nothing for CRI-O's default.
func (c *CRIO) pauseLine() string {
	if c.pause == "" {
		return ""
	}
	return fmt.Sprintf("pause_image = %q\n", c.pause)
}

var (
	crioAssetsOnce sync.Once
	crioAssetsDir  string
	crioAssetsErr  error
)

// crioAssets is the folder with crio and pinns: $WARMER_CRIO_ASSETS, or
// what hack/install-crio.sh builds (cached).
func crioAssets(t TB) string {
	t.Helper()
	crioAssetsOnce.Do(func() {
		if dir := os.Getenv(CRIOAssetsEnv); dir != "" {
			crioAssetsDir = dir
			return
		}
		out, err := exec.Command(filepath.Join(RepoRoot(t), "hack", "install-crio.sh")).Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		crioAssetsDir, crioAssetsErr = lines[len(lines)-1], err
	})
	if crioAssetsErr != nil {
		t.Fatalf("building CRI-O (hack/install-crio.sh): %v", crioAssetsErr)
	}
	return crioAssetsDir
}

// crioHostPaths are what CRI-O writes outside its folder whatever it is
// told: containers/image's blob info cache below /var/lib/containers, and
// the folder of its check of crun in /run. Those that did not exist before
// the first CRI-O of a run are removed after the last.
var crioHostPaths = &hostPathGuard{paths: []string{"/var/lib/containers", "/run/crun"}}

// hostPathGuard removes, once no user is left, the paths that did not
// exist before the first.
type hostPathGuard struct {
	paths []string
	mu    sync.Mutex
	users int
	made  []string
}

func (g *hostPathGuard) acquire(t TB) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.users == 0 {
		g.made = nil
		for _, p := range g.paths {
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
				g.made = append(g.made, p)
				hostcheck.GuardDir(p)
			}
		}
	}
	g.users++
}

func (g *hostPathGuard) release(t TB) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.users--; g.users > 0 {
		return
	}
	for _, p := range g.made {
		if err := os.RemoveAll(p); err != nil {
			t.Logf("removing %s: %v", p, err)
		}
	}
}
