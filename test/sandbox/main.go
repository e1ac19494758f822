// Command sandbox runs warmer's local sandbox (make demo): a real
// kube-apiserver, a registry standing in for docker.io, one containerd per
// simulated node with a Node object and a warmer agent each, and the warmer
// controller; it then applies config/samples, waits for them to be Ready
// and keeps everything up until interrupted.
//
// The registry serves generated images under the samples' names (nginx,
// redis, busybox): they are random data, not the real images, and nothing
// is fetched from the internet.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warmer-dev/warmer/test/testbed"
)

func main() {
	nodes := flag.Int("nodes", 2, "simulated nodes, each with its own containerd")
	runFor := flag.Duration("for", 0, "stop after this long (0: until interrupted)")
	flag.Parse()
	if *nodes < 1 || *nodes > 10 {
		fmt.Fprintln(os.Stderr, "sandbox: --nodes must be between 1 and 10")
		os.Exit(2)
	}
	sb := &sandbox{}
	defer sb.stop()
	run(sb, *nodes)
	wait(*runFor)
}

// sampleImages are the images config/samples asks for, with the size of the
// stand-in pushed for each.
var sampleImages = map[string]int64{
	"library/nginx:1.27":   8 * testbed.MB,
	"library/redis:7.4":    6 * testbed.MB,
	"library/busybox:1.36": 1 * testbed.MB,
}

func run(sb *sandbox, nodes int) {
	root := testbed.RepoRoot(sb)
	sb.Logf("starting kube-apiserver and etcd")
	cp := testbed.StartControlPlane(sb)
	reg := testbed.StartRegistry(sb, testbed.RegistryOptions{Name: "demo"})
	for repoTag, size := range sampleImages {
		reg.PushRandom(sb, repoTag, testbed.ImageOptions{LayerSize: size})
	}
	sb.Logf("registry %s stands in for docker.io", reg.Host)
	bin := testbed.BuildWarmer(sb)
	var sockets []string
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		pool := "web"
		if i%2 == 0 {
			pool = "batch"
		}
		ctd := testbed.StartContainerd(sb, name, testbed.WithMirror("docker.io", reg.Host))
		cp.CreateNode(sb, name, map[string]string{"pool": pool})
		agent := testbed.StartProcess(sb, "agent "+name, bin, "agent", "--kubeconfig", cp.Kubeconfig, "--node-name", name,
			"--container-runtime-endpoint", ctd.Endpoint, "--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", 18080+i),
			"--health-probe-bind-address", "0",
			// The nodes' image filesystems are folders on this machine's
			// disk, whatever else fills it: the guard trips only when full.
			"--image-fs-threshold-percent=99")
		sockets = append(sockets, fmt.Sprintf("%s (pool=%s): CRI %s, agent metrics http://127.0.0.1:%d/metrics, agent log %s",
			name, pool, ctd.Endpoint, 18080+i, agent.LogPath()))
	}
	controller := testbed.StartProcess(sb, "controller", bin, "controller", "--kubeconfig", cp.Kubeconfig,
		"--leader-election-namespace", "default", "--metrics-bind-address", "127.0.0.1:18080", "--health-probe-bind-address", "0")
	kubectl(sb, cp.Kubeconfig, "apply", "-k", filepath.Join(root, "config", "samples"))
	sb.Logf("waiting for the samples to be Ready")
	kubectl(sb, cp.Kubeconfig, "wait", "--for=condition=Ready", "imagewarm", "--all", "-n", "default", "--timeout=180s")
	kubectl(sb, cp.Kubeconfig, "get", "imagewarms", "-A", "-o", "wide")
	kubectl(sb, cp.Kubeconfig, "get", "nodewarms")
	fmt.Printf(`
warmer sandbox is up.

  export KUBECONFIG=%s
  kubectl get imagewarms -A -w     # the samples from config/samples, Ready
  kubectl describe imagewarm web   # events from the agents
  kubectl get nodewarms            # each node agent's report
  kubectl get nodes --show-labels
  kubectl explain imagewarm.spec

Container runtimes (CRI endpoints), one per simulated node:
`, cp.Kubeconfig)
	for _, s := range sockets {
		fmt.Println("  " + s)
	}
	fmt.Println("\nController log:", controller.LogPath())
	fmt.Println("Stop with Ctrl-C (or kill", os.Getpid(), "); everything started here is removed.")
}

func kubectl(sb *sandbox, kubeconfig string, args ...string) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		sb.Fatalf("kubectl %v: %v", args, err)
	}
}

func wait(d time.Duration) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	<-ctx.Done()
	fmt.Println("stopping the sandbox")
}
