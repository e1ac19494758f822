package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/warmer-dev/warmer/internal/image"
)

// WarmerRepo is the release image's repository, as the manifests name it.
const WarmerRepo = "ghcr.io/warmer-dev/warmer"

// imported are the node and tag pairs ImportWarmerImage did.
var imported sync.Map // *RealNode + tag -> true

type importKey struct {
	node *RealNode
	tag  string
}

// ImportWarmerImage builds the release image (make image's build, for this
// machine's platform) with tag as its version, and imports it into the
// node's containerd as WarmerRepo:tag, once per node and tag.
func ImportWarmerImage(t TB, n *RealNode, tag string) {
	t.Helper()
	key := importKey{n, tag}
	if _, done := imported.Load(key); done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	idx, err := image.Build(ctx, image.Options{
		Dir:       RepoRoot(t),
		Version:   tag,
		Platforms: []v1.Platform{{OS: "linux", Architecture: goruntime.GOARCH}},
	})
	if err != nil {
		t.Fatalf("building the image: %v", err)
	}
	dir, err := os.MkdirTemp("", "wb-warmer-image-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	tar := filepath.Join(dir, "warmer-image.tar")
	if err := image.WriteOCI(tar, idx, WarmerRepo+":"+tag); err != nil {
		t.Fatal(err)
	}
	if err := n.ImportImage(tar); err != nil {
		t.Fatal(err)
	}
	imported.Store(key, true)
}

// AppImage is a runnable image of its own: the test bed's pause program
// (which sleeps until stopped) plus a random layer of 1 MB, so that
// neither its id nor its layers are on a node before something pulls
// them (the node's sandbox image is the same program).
func AppImage(t TB) v1.Image {
	t.Helper()
	layers, err := RandomImage(t, ImageOptions{LayerSize: MB}).Layers()
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(GoImage(t, "./test/testbed/pause"), layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// WriteRunLayer writes in dir a kustomization.yaml of head (its
// resources, components and images) and of what only this node knows: the
// API server's port, the containerd state directory (the socket's
// folder), which the agent mounts where a node has /run/containerd, and
// the kubelet's port. The bed's kubelet serves a certificate the
// cluster's signer issued for the node's address (serverTLSBootstrap), so
// the agent verifies it with the CAs pods trust, as by default.
func WriteRunLayer(t TB, n *RealNode, dir, head string) {
	t.Helper()
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
%[1]s
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: warmer-agent, namespace: warmer-system}
      spec:
        template:
          spec:
            containers:
              - name: agent
                env:
                  - {name: KUBERNETES_SERVICE_PORT, value: %[2]q}
            volumes:
              - name: runtime-socket
                hostPath: {path: %[3]s}
  - target: {kind: DaemonSet, name: warmer-agent}
    patch: |-
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--kubelet-port=%[4]d"}
  - patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: warmer-controller, namespace: warmer-system}
      spec:
        template:
          spec:
            containers:
              - name: controller
                env:
                  - {name: KUBERNETES_SERVICE_PORT, value: %[2]q}
`, head, n.APIServerPort, n.Containerd.StateDir(), n.KubeletPort)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
}
