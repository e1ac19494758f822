package testbed

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// startControllers starts kube-controller-manager (every controller: the
// ServiceAccount, DaemonSet, Deployment and node lifecycle ones matter
// here) and kube-scheduler, both as the admin and without serving ports.
func (n *RealNode) startControllers(t TB, assets string) {
	t.Helper()
	// Pods trust both CAs: the API server's and the one that signs the
	// kubelet's serving certificate.
	n.serving = writeServingCA(t, n.dir)
	n.ClusterCA = append(append([]byte{}, n.Config.CAData...), n.serving.PEM...)
	ca := filepath.Join(n.dir, "cluster-ca.crt")
	if err := os.WriteFile(ca, n.ClusterCA, 0o600); err != nil {
		t.Fatal(err)
	}
	certDir := n.env.ControlPlane.APIServer.CertDir
	n.startComponent(t, assets, "kube-controller-manager",
		"--kubeconfig="+n.Kubeconfig,
		"--leader-elect=false",
		"--controllers=*",
		"--secure-port=0",
		// Published to every namespace as kube-root-ca.crt, which pods'
		// token volumes carry.
		"--root-ca-file="+ca,
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--use-service-account-credentials=false",
		// The kubelet asks for its serving certificate (serverTLSBootstrap);
		// the bed approves the request (approveServingCert), this signs it.
		"--cluster-signing-kubelet-serving-cert-file="+n.serving.Cert,
		"--cluster-signing-kubelet-serving-key-file="+n.serving.Key,
		// Its default is below /usr/libexec, which it would create.
		"--flex-volume-plugin-dir="+filepath.Join(n.dir, "kcm-volume-plugins"),
	)
	n.startComponent(t, assets, "kube-scheduler",
		"--kubeconfig="+n.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	)
}

// startComponent runs one of the node's binaries, logging to the node's
// directory, and stops it at cleanup.
func (n *RealNode) startComponent(t TB, assets, name string, args ...string) *process {
	t.Helper()
	p, err := startProcess(name, filepath.Join(n.dir, name+".log"), nil, append([]string{filepath.Join(assets, name)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(10 * time.Second) })
	return p
}

// startKubelet writes the kubelet's configuration and credentials and starts
// it. It registers the Node itself, as system:node:NAME.
func (n *RealNode) startKubelet(t TB, assets string, opts NodeOptions) {
	t.Helper()
	kubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig")
	u, err := n.env.AddUser(envtest.User{Name: "system:node:" + n.Name, Groups: []string{"system:nodes"}}, n.Config)
	if err != nil {
		t.Fatalf("making the kubelet's credentials: %v", err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n.KubeletPort = FreePort(t)
	config := n.kubeletConfigPath()
	b, err = mergeKubeletConfig(n.baseKubeletConfig(), opts.KubeletConfig)
	if err != nil {
		t.Fatalf("the kubelet's configuration: %v", err)
	}
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n.kubeletConfig = string(b)
	args := []string{
		"--config=" + config,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(n.dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet-pki"),
		// Not a configuration field; its default is below /usr/libexec.
		"--volume-plugin-dir=" + filepath.Join(n.dir, "volume-plugins"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
	}
	n.kubeletArgs = append(args, opts.KubeletFlags...)
	n.kubelet = n.startComponent(t, assets, "kubelet", n.kubeletArgs...)
}

// mergeKubeletConfig sets the top-level fields of extra over the YAML base.
func mergeKubeletConfig(base string, extra map[string]any) ([]byte, error) {
	if len(extra) == 0 {
		return []byte(base), nil
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(base), &m); err != nil {
		return nil, err
	}
	maps.Copy(m, extra)
	return yaml.Marshal(m)
}

// kubeletConfigPath is the file the kubelet reads its configuration from.
func (n *RealNode) kubeletConfigPath() string { return filepath.Join(n.dir, "kubelet.yaml") }

// baseKubeletConfig is the kubelet's configuration for this machine: cgroup v1
// and swap allowed, the node's own cgroup, address and directories, no
// iptables chains, and eviction thresholds low enough that a busy shared
// disk does not evict the tests' pods.
func (n *RealNode) baseKubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[3]s
authorization:
  mode: Webhook
serverTLSBootstrap: true
containerRuntimeEndpoint: %[4]s
cgroupDriver: cgroupfs
cgroupRoot: /%[5]s
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
podLogsDir: %[6]s
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
`, n.IP, n.KubeletPort, n.certs.CA, n.Containerd.Endpoint, n.cgroup, n.podLogs())
}

// removePods stops and removes every pod sandbox through the CRI once the
// kubelet has stopped, so that containerd's shims and the containers end
// and their mounts go; then kills any shim left. The kubelet itself never
// stops pods when it stops.
func (n *RealNode) removePods() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n.kubelet != nil {
		n.kubelet.stop(10 * time.Second)
	}
	conn, err := grpc.NewClient(n.Containerd.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		rt := runtimeapi.NewRuntimeServiceClient(conn)
		if list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			for _, sb := range list.Items {
				_, _ = rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id})
				_, _ = rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id})
			}
		}
		_ = conn.Close()
	}
	killProcsMentioning(n.Containerd.Socket)
}

// KubeletURL is the kubelet's HTTPS endpoint, for tests that call it.
func (n *RealNode) KubeletURL() string {
	return "https://" + n.IP + ":" + strconv.Itoa(n.KubeletPort)
}
