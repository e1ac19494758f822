package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/test/testbed"
)

// testPinFromPod: an ImageWarm with retention Pinned, warmed by the agent
// running as the DaemonSet's pod (reaching containerd's images API through
// the socket mounted in it, under its real securityContext), ends with
// the image pinned: CRI reports it pinned, containerd's image carries the
// pin label and warmer's mark, the NodeWarm says pinned with the Pinning
// condition True. Deleting the ImageWarm unpins it again.
func testPinFromPod(t *testing.T) {
	ctx := context.Background()
	reg.PushRandom(t, "warmer-dev/pinned:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	const ref = "docker.io/warmer-dev/pinned:v1"
	// retention Pinned is a cluster-wide lever: the operator marks the
	// namespaces that may use it (config/policy/imagewarm_levers_policy.yaml).
	kubectl(t, "label", "namespace", "default", "warmer.dev/cluster-levers=allowed", "--overwrite")
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pinned"},
		Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{ref}, Retention: warmv1.RetentionPinned},
	}
	if err := node.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Client.Delete(context.Background(), iw)
		removeImage(t, ref)
	})
	waitImageWarmReady(t, iw.Name)
	poll(t, time.Minute, ref+" pinned everywhere", func() error { return pinnedEverywhere(t, ref) })
	t.Logf("pinned by the agent's pod; containerd labels %s", containerdLabels(t, ref))

	if err := node.Client.Delete(ctx, iw); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, ref+" unpinned once no ImageWarm wants it pinned", func() error {
		if st := imageStatus(t, ref); st == nil || st.Pinned {
			return fmt.Errorf("CRI image %+v", st)
		}
		if labels := containerdLabels(t, ref); strings.Contains(labels, criclient.MarkLabel) || strings.Contains(labels, criclient.PinLabel) {
			return fmt.Errorf("containerd labels %q", labels)
		}
		return nil
	})
}

// pinnedEverywhere checks the pin as the kubelet (CRI), containerd and
// the NodeWarm see it.
func pinnedEverywhere(t *testing.T, ref string) error {
	if st := imageStatus(t, ref); st == nil || !st.Pinned {
		return fmt.Errorf("CRI image %+v, want pinned", st)
	}
	labels := containerdLabels(t, ref)
	for _, want := range []string{criclient.PinLabel + "=" + criclient.PinValue, criclient.MarkLabel + "=" + criclient.MarkValue} {
		if !strings.Contains(labels, want) {
			return fmt.Errorf("containerd labels %q lack %s", labels, want)
		}
	}
	var nw warmv1.NodeWarm
	if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &nw); err != nil {
		return err
	}
	c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionPinning)
	if c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("NodeWarm Pinning condition %+v", c)
	}
	for _, img := range nw.Status.Images {
		if img.Image == ref {
			if img.State != warmv1.ImagePresent || !img.Pinned {
				return fmt.Errorf("NodeWarm: %s is %s, pinned %v", ref, img.State, img.Pinned)
			}
			return nil
		}
	}
	return fmt.Errorf("the NodeWarm lists no %s", ref)
}

// imageStatus is CRI's image named ref, nil when absent.
func imageStatus(t *testing.T, ref string) *runtimeapi.Image {
	t.Helper()
	cri := node.Containerd.ImageService(t)
	resp, err := cri.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", ref, err)
	}
	return resp.GetImage()
}

// containerdLabels are the labels of containerd's image named ref in the
// CRI plugin's namespace, as `ctr images ls` prints them.
func containerdLabels(t *testing.T, ref string) string {
	t.Helper()
	out, err := node.Ctr("-n", "k8s.io", "images", "ls", "name=="+ref)
	if err != nil {
		t.Fatalf("ctr images ls %s: %v\n%s", ref, err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == ref {
			return f[len(f)-1]
		}
	}
	t.Fatalf("ctr lists no %s:\n%s", ref, out)
	return ""
}
