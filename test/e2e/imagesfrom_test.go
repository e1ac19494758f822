package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestImagesFromDeployment warms the image of a Deployment's template on
// the nodes an ImageWarm selects, with the real controller and agents,
// containerd and a registry, and follows the template when its image
// changes, without anyone editing the ImageWarm. The new image is first
// missing from the registry, so Ready is seen False for the new set while
// the old image is still on the node, and True only once the new one is
// there. No kube-controller-manager runs: the controller reads the
// Deployment object, not its Pods.
func TestImagesFromDeployment(t *testing.T) {
	const wns = "workloads"
	regs := testbed.StartRegistries(t)
	imgA := regs.Anon.PushRandom(t, "wl/app:a", testbed.ImageOptions{LayerSize: testbed.MB})
	refB := regs.Anon.Ref("wl/app:b") // pushed later
	// A short back-off: the node retries the new image soon after it is
	// pushed.
	agent := testbed.DefaultAgent
	agent.BackOffInitial, agent.BackOffMax = 2*time.Second, 4*time.Second
	f := testbed.StartFleet(t, map[string]map[string]string{
		"wl-web":   {"pool": "web"},
		"wl-batch": {"pool": "batch"},
	}, testbed.FleetOptions{Agent: &agent})
	ctx := context.Background()
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wns}})
	pod := map[string]string{"pod": "web"}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: wns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: pod}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: pod},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: imgA.Ref}}}}}}
	f.Create(t, deploy)
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: wns, Name: "from-web"}, Spec: warmv1.ImageWarmSpec{
		NodeSelector: &warmv1.NodeSelector{MatchLabels: map[string]warmv1.LabelValue{"pool": "web"}},
		ImagesFrom:   &warmv1.ImagesFrom{WorkloadSelector: warmv1.LabelSelector{MatchLabels: map[string]warmv1.LabelValue{"app": "web"}}}}}
	f.Create(t, iw)
	web, batch := f.Nodes["wl-web"], f.Nodes["wl-batch"]

	t.Run("the Deployment's image is on the selected node", func(t *testing.T) {
		if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/from-web", "-n", wns, "--timeout=120s"); err != nil {
			t.Fatalf("kubectl wait: %v\n%s", err, out)
		}
		if err := web.AllPresent(t, imgA.Ref); err != nil {
			t.Fatal(err)
		}
		if batch.Present(t, imgA.Ref) {
			t.Errorf("wl-batch is not selected but has %s", imgA.Ref)
		}
		st := f.ImageWarm(t, wns, "from-web").Status
		if st.Resolved == nil || !slices.Equal(st.Resolved.Images, []string{imgA.Ref}) {
			t.Fatalf("status.resolved %+v, want %s", st.Resolved, imgA.Ref)
		}
		if err := echoes(f, "wl-web", wns, "from-web", st.Resolved.Hash); err != nil {
			t.Error(err)
		}
	})

	t.Run("a new template image: Ready False while it is missing, present and Ready without an ImageWarm edit", func(t *testing.T) {
		deploy.Spec.Template.Spec.Containers[0].Image = refB
		if err := f.CP.Client.Update(ctx, deploy); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 60*time.Second, "status lists the new image and Ready is False for it", func() error {
			st := f.ImageWarm(t, wns, "from-web").Status
			if st.Resolved == nil || !slices.Equal(st.Resolved.Images, []string{refB}) {
				return fmt.Errorf("resolved %+v", st.Resolved)
			}
			if meta.IsStatusConditionTrue(st.Conditions, warmv1.ConditionReady) {
				return fmt.Errorf("ready for %s, which no registry has: %+v", refB, st.Conditions)
			}
			if len(st.Failures) == 0 || st.Failures[0].Reason != "NotFound" || st.Failures[0].Image != refB {
				return fmt.Errorf("failures %+v", st.Failures)
			}
			return nil
		})
		if !web.Present(t, imgA.Ref) {
			t.Log("the old image is gone from wl-web; warmer does not remove images, so something else did")
		}
		regs.Anon.PushRandom(t, "wl/app:b", testbed.ImageOptions{LayerSize: testbed.MB})
		testbed.Eventually(t, 90*time.Second, "Ready for the new image", func() error {
			got := f.ImageWarm(t, wns, "from-web")
			if !meta.IsStatusConditionTrue(got.Status.Conditions, warmv1.ConditionReady) {
				return fmt.Errorf("not ready: %+v", got.Status.Conditions)
			}
			// Ready for the new set means the image is there now.
			if err := web.AllPresent(t, refB); err != nil {
				t.Fatalf("Ready with %s missing: %v", refB, err)
			}
			if got.Generation != 1 {
				t.Errorf("ImageWarm generation %d: it was edited", got.Generation)
			}
			return echoes(f, "wl-web", wns, "from-web", got.Status.Resolved.Hash)
		})
		if batch.Present(t, refB) {
			t.Errorf("wl-batch is not selected but has %s", refB)
		}
	})
}

// echoes checks that a node's NodeWarm acts on the resolved set of hash.
func echoes(f *testbed.Fleet, node, ns, name, hash string) error {
	var nw warmv1.NodeWarm
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Name: node}, &nw); err != nil {
		return err
	}
	for _, w := range nw.Status.Warms {
		if w.Namespace == ns && w.Name == name {
			if w.Resolved != hash {
				return fmt.Errorf("NodeWarm %s echoes resolved %q, status has %q", node, w.Resolved, hash)
			}
			return nil
		}
	}
	return fmt.Errorf("NodeWarm %s does not list %s/%s", node, ns, name)
}
