package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// ControlPlane is a real kube-apiserver and etcd, with warmer's CRDs
// installed.
type ControlPlane struct {
	// Config is an admin rest.Config.
	Config *rest.Config
	// Client is an admin client that knows warmer's types.
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig file, for kubectl.
	Kubeconfig string
	// AuditLog is the API server's audit log of Secret requests (JSON lines).
	AuditLog string

	env *envtest.Environment
	// assets is KUBEBUILDER_ASSETS resolved; pids are the guarded process
	// groups of etcd and kube-apiserver; dirs are removed after they stop.
	assets string
	pids   []int
	dirs   []string
	// identity is set once InstallIdentity has installed warmer's roles
	// and policies; identityMu orders the fleets that share the plane.
	identityMu sync.Mutex
	identity   bool
	// runsPods is set when a kubelet runs the Pods bound to a node of
	// this plane (a RealNode's).
	runsPods bool
}

// StartControlPlane starts kube-apiserver and etcd from KUBEBUILDER_ASSETS,
// installs the CRDs from config/crd/bases and stops everything at cleanup.
func StartControlPlane(t TB) *ControlPlane {
	t.Helper()
	return startControlPlane(t, nil)
}

// startControlPlane is StartControlPlane with a hook that adjusts the
// environment (the API server's flags) before it starts.
func startControlPlane(t TB, configure func(*envtest.Environment)) *ControlPlane {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests through `make test`, which builds kube-apiserver and etcd")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(t), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	auditLog := enableSecretAudit(t, env)
	if configure != nil {
		configure(env)
	}
	cfg, err := env.Start()
	abs, _ := filepath.EvalSymlinks(assets)
	pids := childrenRunning(abs)
	for _, pid := range pids {
		hostcheck.GuardGroup(pid) // envtest gives each its own process group
	}
	for _, dir := range envtestDirs(env) {
		hostcheck.GuardDir(dir)
	}
	if err != nil {
		// envtest leaves its processes running when, say, a CRD is refused.
		_ = env.Stop()
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	cp := &ControlPlane{Config: cfg, env: env, AuditLog: auditLog, assets: abs, pids: pids}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
		for _, pid := range cp.pids {
			hostcheck.UnguardGroup(pid)
		}
		for _, dir := range cp.dirs {
			_ = os.RemoveAll(dir)
		}
	})
	if cp.Client, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
		t.Fatal(err)
	}
	cp.Kubeconfig = cp.writeKubeconfig(t)
	return cp
}

// envtestDirs are the temp dirs envtest made for etcd's data and the API
// server's certificates.
func envtestDirs(env *envtest.Environment) []string {
	var dirs []string
	if etcd := env.ControlPlane.Etcd; etcd != nil && etcd.DataDir != "" {
		dirs = append(dirs, etcd.DataDir)
	}
	if api := env.ControlPlane.APIServer; api != nil && api.CertDir != "" {
		dirs = append(dirs, api.CertDir)
	}
	return dirs
}

// Scheme knows the built-in types and warmer's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = warmv1.AddToScheme(s)
	return s
}

// AddUser makes a user with the given groups and returns its rest.Config.
func (cp *ControlPlane) AddUser(t TB, name string, groups ...string) *rest.Config {
	t.Helper()
	u, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, cp.Config)
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	return u.Config()
}

func (cp *ControlPlane) writeKubeconfig(t TB) string {
	t.Helper()
	u, err := cp.env.AddUser(envtest.User{Name: "testbed-admin", Groups: []string{"system:masters"}}, cp.Config)
	if err != nil {
		t.Fatalf("adding the admin user: %v", err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(shortDir(t, "kube"), "kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// CreateNode creates a Node object named name with the given labels, as the
// kubelet would register it, and deletes it at cleanup.
func (cp *ControlPlane) CreateNode(t TB, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[corev1.LabelHostname] = name
	ctx := context.Background()
	if err := cp.Client.Create(ctx, node); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), node) })
	return node
}

// RepoRoot is the folder holding warmer's go.mod.
func RepoRoot(t TB) string {
	t.Helper()
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test bed's source")
	}
	dir := filepath.Dir(file)
	if !filepath.IsAbs(dir) {
		// Built with -trimpath (make demo shares the release build's
		// flags and cache so): the source path is the module's, and the
		// checkout is where the command runs.
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		dir = wd
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal(fmt.Errorf("no go.mod above %s", file))
		}
		dir = parent
	}
}

// GVR of warmer's resources, for dynamic clients and kubectl checks.
var (
	ImageWarmsGVR = schema.GroupVersionResource{Group: warmv1.GroupVersion.Group, Version: warmv1.GroupVersion.Version, Resource: "imagewarms"}
	NodeWarmsGVR  = schema.GroupVersionResource{Group: warmv1.GroupVersion.Group, Version: warmv1.GroupVersion.Version, Resource: "nodewarms"}
)

// Kubectl runs kubectl from PATH against the control plane as the admin,
// and returns its combined output. A missing kubectl fails the test.
func (cp *ControlPlane) Kubectl(t TB, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed for this test: %v", err)
	}
	// Its discovery cache goes beside the kubeconfig, not into ~/.kube.
	cache := filepath.Join(filepath.Dir(cp.Kubeconfig), "cache")
	out, err := exec.Command(path, append([]string{"--kubeconfig", cp.Kubeconfig, "--cache-dir", cache}, args...)...).CombinedOutput()
	return string(out), err
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// port, with the same serving and signing certificates and the same etcd,
// as a control-plane restart or in-place upgrade does: existing kubeconfigs
// and clients keep working, and nothing stored is lost. The API server gets
// SIGTERM and, like a kubelet ending a static Pod, SIGKILL after grace: it
// otherwise waits out --request-timeout (60 s) for open requests.
func (cp *ControlPlane) RestartAPIServer(t TB, grace time.Duration) {
	t.Helper()
	api := cp.env.ControlPlane.APIServer
	port := api.Port
	// envtest removes a certificate directory it made itself when the API
	// server stops, and a fresh start would mint a new serving CA that no
	// kubeconfig trusts: keep a copy and start from it.
	keep, err := os.MkdirTemp("/tmp", "wb-kcert-")
	if err != nil {
		t.Fatal(err)
	}
	hostcheck.GuardDir(keep)
	cp.dirs = append(cp.dirs, keep)
	if err := copyFiles(api.CertDir, keep); err != nil {
		t.Fatalf("keeping the API server's certificates: %v", err)
	}
	pid := cp.apiServerPid(t)
	if err := endProcess(pid, grace); err != nil {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	hostcheck.UnguardGroup(pid)
	cp.pids = slices.DeleteFunc(cp.pids, func(p int) bool { return p == pid })
	// The process is gone; this only tidies envtest's bookkeeping.
	_ = api.Stop()
	api.CertDir = keep
	if err := api.Start(); err != nil {
		t.Fatalf("starting kube-apiserver again: %v", err)
	}
	pid = cp.apiServerPid(t)
	hostcheck.GuardGroup(pid)
	cp.pids = append(cp.pids, pid)
	if api.Port != port {
		t.Fatal(fmt.Errorf("kube-apiserver came back on port %s, not %s", api.Port, port))
	}
}

// apiServerPid finds the running kube-apiserver among envtest's processes.
func (cp *ControlPlane) apiServerPid(t TB) int {
	t.Helper()
	for _, pid := range childrenRunning(cp.assets) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && filepath.Base(exe) == "kube-apiserver" {
			return pid
		}
	}
	t.Fatal("no kube-apiserver process found")
	return 0
}

// endProcess sends pid SIGTERM, then SIGKILL after grace, and waits until
// its parent (envtest) has reaped it.
func endProcess(pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(grace)
	for parentOf(pid) != 0 {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// copyFiles copies the regular files of src into dst.
func copyFiles(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
