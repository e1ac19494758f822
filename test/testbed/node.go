package testbed

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// NodeAssetsEnv names the folder with the real node's binaries (kubelet,
// kube-controller-manager, kube-scheduler, containerd 2.x, its runc shim and
// ctr) that hack/install-node-assets.sh prints; `make test` sets it.
const NodeAssetsEnv = "WARMER_NODE_ASSETS"

// NodeOptions shape a real node.
type NodeOptions struct {
	// Name is the node's name; "bed-node" when empty.
	Name string
	// Mirrors serves every pull from a registry (the key, say "ghcr.io")
	// from a test registry (the value, host:port), so that manifests keep
	// their public image names and nothing leaves the machine.
	Mirrors map[string]string
	// KubeletConfig sets top-level fields of the kubelet's
	// KubeletConfiguration over the test bed's own (for example
	// "imageMaximumGCAge", "registerWithTaints" or
	// "imagePullCredentialsVerificationPolicy"); a key the test bed sets
	// too is replaced whole.
	KubeletConfig map[string]any
	// KubeletFlags are extra command-line flags for the kubelet, for the
	// settings that are flags only (say --image-credential-provider-config).
	KubeletFlags []string
}

// RealNode is a one-node Kubernetes cluster with a real kubelet: kube-apiserver
// and etcd (with the Node and RBAC authorizers, NodeRestriction and service
// account tokens), kube-controller-manager, kube-scheduler, containerd 2.x
// with runc, and the kubelet, all on this machine. Pods run with
// hostNetwork: true and reach the API server at APIServerHost and
// APIServerPort, which their KUBERNETES_SERVICE_HOST and _PORT must name.
type RealNode struct {
	// ControlPlane is the API server: an admin Config, Client and
	// Kubeconfig, and Kubectl.
	*ControlPlane
	// Name is the Node object's name.
	Name string
	// IP is the node's InternalIP, an address of its own on lo where the
	// kubelet listens.
	IP string
	// KubeletPort is the kubelet's authenticated HTTPS port on IP.
	KubeletPort int
	// APIServerHost and APIServerPort are where hostNetwork pods reach the
	// API server.
	APIServerHost, APIServerPort string
	// Containerd is the node's runtime; Containerd.Socket is its socket.
	Containerd *Containerd
	// ClusterCA is the PEM bundle pods trust (kube-root-ca.crt): the API
	// server's CA and the one that signed the kubelet's serving
	// certificate, which the kubelet asked for as production kubelets do
	// (serverTLSBootstrap) and the bed approved.
	ClusterCA []byte

	dir     string
	cgroup  string
	certs   kubeletClientCerts
	serving servingCA
	kubelet *process
	// kubeletArgs are the kubelet's flags, and kubeletConfig the
	// configuration it started with, for a restart.
	kubeletArgs   []string
	kubeletConfig string
	assets        string
	before        Traces
}

// StartNode brings up a one-node cluster and waits until the Node is Ready
// and the default ServiceAccount exists. Everything it starts is stopped, and
// every host change it makes (sysctls, an address on lo, cgroups, mounts,
// log links) undone, at cleanup, and by the guard if the test binary dies.
// Only one test binary at a time runs real nodes on a machine; a second
// waits for the first to finish.
func StartNode(t TB, opts NodeOptions) *RealNode {
	t.Helper()
	assets := nodeAssets(t)
	if opts.Name == "" {
		opts.Name = "bed-node"
	}
	if err := hostcheck.GuardLock(nodeLock); err != nil {
		t.Fatalf("waiting for the machine's real node: %v", err)
	}
	n := &RealNode{Name: opts.Name, dir: shortDir(t, "node"), cgroup: "wb-" + opts.Name + "-" + randomToken(), assets: assets}
	n.before = hostBefore()
	saveSysctls(t)
	n.IP = addNodeAddress(t)
	makeCgroupRoot(t, n.cgroup)
	n.before.Created = guardHostPaths(t)
	guardLogLinks(t, n.podLogs())

	n.ControlPlane = n.startControlPlane(t)
	u, err := url.Parse(n.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	n.APIServerHost, n.APIServerPort = u.Hostname(), u.Port()
	n.startControllers(t, assets)

	opt := []ContainerdOption{withNodeRuntime(assets, PauseImage)}
	for reg, host := range opts.Mirrors {
		opt = append(opt, WithMirror(reg, host))
	}
	n.Containerd = StartContainerd(t, n.Name, opt...)
	// containerd's shims leave its process group as they start; they name
	// its socket.
	hostcheck.GuardHost("procs", n.Containerd.Socket)
	n.importPause(t)
	t.Cleanup(n.removePods)
	n.startKubelet(t, assets, opts)
	n.approveServingCert(t)
	n.waitReady(t)
	return n
}

// nodeAssets checks NodeAssetsEnv and the binaries in it.
func nodeAssets(t TB) string {
	t.Helper()
	dir := os.Getenv(NodeAssetsEnv)
	if dir == "" {
		t.Fatalf("%s is not set: run the tests through `make test`, which builds the node's binaries (hack/install-node-assets.sh)", NodeAssetsEnv)
	}
	for _, bin := range []string{"kubelet", "kube-controller-manager", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Fatalf("%s has no %s: run hack/install-node-assets.sh", dir, bin)
		}
	}
	for _, bin := range []string{"runc", "mount", "ip"} {
		if _, err := lookPath(bin); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(cniPluginDir, "loopback")); err != nil {
		t.Fatalf("no CNI plugins in %s: run `make testbed` (it installs containernetworking-plugins)", cniPluginDir)
	}
	return dir
}

// startControlPlane starts the API server as a cluster's: the Node
// authorizer and NodeRestriction for the kubelet, ServiceAccount admission
// for pods' tokens (envtest turns it off), and a client certificate for
// calling kubelets, allowed to by RBAC.
func (n *RealNode) startControlPlane(t TB) *ControlPlane {
	t.Helper()
	n.certs = writeKubeletClientCerts(t, n.dir)
	certs := n.certs
	cp := startControlPlane(t, func(env *envtest.Environment) {
		args := env.ControlPlane.GetAPIServer().Configure()
		args.Set("authorization-mode", "Node,RBAC")
		args.Set("enable-admission-plugins", "NodeRestriction")
		args.Disable("disable-admission-plugins")
		args.Set("kubelet-client-certificate", certs.Cert)
		args.Set("kubelet-client-key", certs.Key)
		// The node's Hostname address is its name, which no DNS knows.
		args.Set("kubelet-preferred-address-types", "InternalIP")
	})
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "warmer-testbed:kubelet-api-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}
	if err := cp.Client.Create(context.Background(), crb); err != nil {
		t.Fatalf("binding the API server's kubelet client: %v", err)
	}
	cp.runsPods = true
	return cp
}

// importPause imports the stand-in pause image, which the kubelet never
// pulls: containerd's pinned sandbox image names it.
func (n *RealNode) importPause(t TB) {
	t.Helper()
	tar := WriteImageTar(t, GoImage(t, "./test/testbed/pause"), PauseImage, n.dir)
	if err := n.Containerd.ImportImage(tar); err != nil {
		t.Fatalf("importing the pause image: %v", err)
	}
	_ = os.Remove(tar)
}

// waitReady waits for the Node's Ready condition and for the default
// ServiceAccount, which every pod in the default namespace needs.
func (n *RealNode) waitReady(t TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ready := func(ctx context.Context) error {
		var node corev1.Node
		if err := n.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s not Ready: %s", n.Name, c.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", n.Name)
	}
	if err := waitFor(ctx, n.kubelet, "a Ready node", ready); err != nil {
		t.Fatalf("%v\ncontainerd's log:\n%s", err, n.Containerd.Log(20))
	}
	sa := func(ctx context.Context) error {
		return n.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
	}
	if err := waitFor(ctx, n.kubelet, "the default ServiceAccount", sa); err != nil {
		t.Fatal(err)
	}
}

// KubeletLog returns the last lines of the kubelet's log.
func (n *RealNode) KubeletLog(lines int) string { return n.kubelet.tail(lines) }

// Ctr runs ctr against the node's containerd (see Containerd.Ctr).
func (n *RealNode) Ctr(args ...string) (string, error) { return n.Containerd.Ctr(args...) }

// ImportImage imports an image tarball into the node's containerd, where
// the kubelet finds it (see Containerd.ImportImage).
func (n *RealNode) ImportImage(tarPath string) error { return n.Containerd.ImportImage(tarPath) }

// PodEnv is what a hostNetwork pod's container needs in its env to reach the
// node's API server.
func (n *RealNode) PodEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: n.APIServerHost},
		{Name: "KUBERNETES_SERVICE_PORT", Value: n.APIServerPort},
	}
}

func (n *RealNode) podLogs() string { return filepath.Join(n.dir, "pod-logs") }
