// Package nodesignal shows the agent's signals on its own Node on the test
// bed (real kube-apiserver with the shipped RBAC and admission policies,
// real containerd and registries, the real agent binary with its
// Pod-bound token): the warm label of an ImageWarm with spec.nodeLabel
// follows the images, and the ImagesWarm condition follows the
// startup-taint ImageWarms.
package nodesignal

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const ns = "signals"

// TestNodeSignals walks a warm label and the ImagesWarm condition through
// their life on two nodes; the steps build on each other, in order.
func TestNodeSignals(t *testing.T) {
	regs := testbed.StartRegistries(t)
	cat := regs.LoadCatalog(t, false)
	f := testbed.StartFleet(t, map[string]map[string]string{
		"node-1": {"pool": "web"},
		"node-2": {"pool": "batch"},
	}, testbed.FleetOptions{})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	f.CP.AllowClusterLevers(t, ns)
	key := warmv1.NodeLabelKey(ns, "web")
	images := []string{cat.Small.Ref, cat.Medium.Ref}

	t.Run("no startup-taint ImageWarm: ImagesWarm True, NothingToWarm", func(t *testing.T) {
		for _, n := range []string{"node-1", "node-2"} {
			waitCondition(t, f, n, corev1.ConditionTrue, warmv1.ReasonNothingToWarm)
		}
	})

	t.Run("the label appears on the warm node only", func(t *testing.T) {
		iw := build.ImageWarm(ns, "web", build.Images(images...), build.MatchLabel("pool", "web"))
		iw.Spec.NodeLabel = true
		f.Create(t, iw)
		waitLabel(t, f, "node-1", key, true)
		if err := f.Nodes["node-1"].AllPresent(t, images...); err != nil {
			t.Errorf("labelled before its images are present: %v", err)
		}
		if labels := nodeLabels(t, f, "node-2"); labels[key] != "" {
			t.Errorf("node-2 is not selected but carries %s", key)
		}
		if labels := nodeLabels(t, f, "node-1"); labels["pool"] != "web" {
			t.Errorf("node-1's own labels changed: %v", labels)
		}
	})

	t.Run("a settled node is not written", func(t *testing.T) {
		before := nodeVersion(t, f, "node-1")
		// Three resync periods: each pass decides the same labels and
		// condition, and writes neither.
		time.Sleep(3 * testbed.DefaultAgent.Resync)
		if after := nodeVersion(t, f, "node-1"); after != before {
			t.Errorf("node-1 written while nothing changed: resourceVersion %s, then %s", before, after)
		}
	})

	t.Run("an image removed from the runtime takes the label, its return brings it back", func(t *testing.T) {
		seen := watchLabel(t, f, "node-1", key)
		f.Nodes["node-1"].Remove(t, cat.Small.Ref)
		testbed.Eventually(t, 90*time.Second, "label gone and back", func() error { return seen.wentAndCame() })
	})

	t.Run("an image added to the ImageWarm takes the label until it is there", func(t *testing.T) {
		extra := regs.Anon.PushRandom(t, "test/signals-extra:v1", testbed.ImageOptions{LayerSize: testbed.MB})
		seen := watchLabel(t, f, "node-1", key)
		updateWarm(t, f, "web", func(iw *warmv1.ImageWarm) {
			iw.Spec.Images = append(iw.Spec.Images, warmv1.ImageReference(extra.Ref))
		})
		testbed.Eventually(t, 90*time.Second, "label gone and back", func() error { return seen.wentAndCame() })
		if err := f.Nodes["node-1"].AllPresent(t, extra.Ref); err != nil {
			t.Error(err)
		}
	})

	t.Run("a stale warm label is removed, others stay", func(t *testing.T) {
		ghost := warmv1.NodeLabelKey(ns, "deleted-long-ago")
		patchLabels(t, f, "node-1", map[string]any{ghost: "true", "example.com/team": "a"})
		waitLabel(t, f, "node-1", ghost, false)
		if labels := nodeLabels(t, f, "node-1"); labels["example.com/team"] != "a" || labels[key] != "true" {
			t.Errorf("node-1 labels %v: lost what was not stale", labels)
		}
	})

	t.Run("ImagesWarm follows the startup-taint ImageWarm", func(t *testing.T) {
		missing := regs.Anon.Host + "/test/never-pushed:v1"
		gate := build.ImageWarm(ns, "gate", build.Images(cat.Small.Ref, missing), build.MatchLabel("pool", "web"))
		gate.Spec.StartupTaint = true
		f.Create(t, gate)
		c := waitCondition(t, f, "node-1", corev1.ConditionFalse, warmv1.ReasonImagesMissing)
		if want := "Images of the 1 ImageWarms with startupTaint are missing; the node's NodeWarm lists each"; c.Message != want {
			t.Errorf("message %q, want %q", c.Message, want)
		}
		waitCondition(t, f, "node-2", corev1.ConditionTrue, warmv1.ReasonNothingToWarm)
		updateWarm(t, f, "gate", func(iw *warmv1.ImageWarm) {
			iw.Spec.Images = []warmv1.ImageReference{warmv1.ImageReference(cat.Small.Ref), warmv1.ImageReference(cat.Medium.Ref)}
		})
		c = waitCondition(t, f, "node-1", corev1.ConditionTrue, warmv1.ReasonImagesPresent)
		if !c.LastHeartbeatTime.Equal(&c.LastTransitionTime) {
			t.Errorf("heartbeat %v, transition %v: a write on change moves both", c.LastHeartbeatTime, c.LastTransitionTime)
		}
		if n := kubeletConditions(t, f, "node-1"); n != 0 {
			t.Errorf("the agent wrote %d conditions besides ImagesWarm", n)
		}
	})

	t.Run("turned off, the label goes", func(t *testing.T) {
		updateWarm(t, f, "web", func(iw *warmv1.ImageWarm) { iw.Spec.NodeLabel = false })
		waitLabel(t, f, "node-1", key, false)
		updateWarm(t, f, "web", func(iw *warmv1.ImageWarm) { iw.Spec.NodeLabel = true })
		waitLabel(t, f, "node-1", key, true)
	})

	t.Run("the ImageWarm deleted, the label goes", func(t *testing.T) {
		if err := f.CP.Client.Delete(context.Background(), build.ImageWarm(ns, "web")); err != nil {
			t.Fatal(err)
		}
		waitLabel(t, f, "node-1", key, false)
	})

	t.Run("the agent's token writes only its own Node's warm labels and ImagesWarm", func(t *testing.T) {
		agentWrites(t, f, key)
	})

	t.Run("a namespace not marked cannot ask for the label", func(t *testing.T) {
		f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unmarked"}})
		iw := build.ImageWarm("unmarked", "web", build.Images(cat.Small.Ref))
		iw.Spec.NodeLabel = true
		err := f.CP.Client.Create(context.Background(), iw)
		if err == nil || !strings.Contains(err.Error(), "spec.nodeLabel") {
			t.Errorf("creating an ImageWarm with nodeLabel in a namespace not marked: %v, want refused naming spec.nodeLabel", err)
		}
	})
}

// agentWrites makes, with node-1's agent's own Pod-bound token and as dry
// runs (the agent keeps running), the Node writes the agent makes and
// those it must not: RBAC grants patch on every Node and its status; the
// admission policies let it change only warm labels ("true") on its own
// Node and only the ImagesWarm condition of its own Node's status.
func agentWrites(t *testing.T, f *testbed.Fleet, key string) {
	c, err := client.New(f.CP.AgentConfig(t, "node-1"), client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	labels := func(node string, l map[string]any) error {
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": l}})
		if err != nil {
			return err
		}
		return c.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
			client.RawPatch(types.MergePatchType, data), client.DryRunAll)
	}
	condition := func(node, typ string) error {
		cond := corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: corev1.ConditionTrue, Reason: "Probe",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
		data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
		if err != nil {
			return err
		}
		return c.Status().Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
			client.RawPatch(types.StrategicMergePatchType, data), client.DryRunAll)
	}
	other := warmv1.NodeLabelKey("other-team", "web")
	for _, tc := range []struct {
		name    string
		do      func() error
		allowed bool
		msg     string
	}{
		{"add a warm label to its Node", func() error { return labels("node-1", map[string]any{other: "true"}) }, true, ""},
		{"remove a warm label from its Node", func() error { return labels("node-1", map[string]any{key: nil}) }, true, ""},
		{"add a warm label to another Node", func() error { return labels("node-2", map[string]any{key: "true"}) }, false,
			"may change only Node node-1, not node-2"},
		{"add a label under another prefix", func() error { return labels("node-1", map[string]any{"example.com/warm": "true"}) }, false,
			"change no other label"},
		{"spoof a warm-looking key with a dotted prefix", func() error {
			return labels("node-1", map[string]any{"a.b.warm.warmer.dev/web": "true"})
		}, false, "change no other label"},
		{"set a warm label to another value", func() error { return labels("node-1", map[string]any{other: "false"}) }, false,
			"change no other label"},
		{"change another label", func() error { return labels("node-1", map[string]any{"pool": "gpu"}) }, false, "change no other label"},
		{"remove another label", func() error { return labels("node-1", map[string]any{"pool": nil}) }, false, "change no other label"},
		{"write ImagesWarm on its Node", func() error { return condition("node-1", warmv1.ConditionImagesWarm) }, true, ""},
		{"write ImagesWarm on another Node", func() error { return condition("node-2", warmv1.ConditionImagesWarm) }, false,
			"may change only Node node-1, not node-2"},
		{"write Ready on its Node", func() error { return condition("node-1", string(corev1.NodeReady)) }, false,
			"may write only condition ImagesWarm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			switch {
			case tc.allowed && err != nil:
				t.Errorf("refused: %v", err)
			case !tc.allowed && (err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("got %v, want refused by a policy saying %q", err, tc.msg)
			}
		})
	}
}

// nodeLabels reads a Node's labels as the admin.
func nodeLabels(t *testing.T, f *testbed.Fleet, node string) map[string]string {
	t.Helper()
	return getNode(t, f, node).Labels
}

func nodeVersion(t *testing.T, f *testbed.Fleet, node string) string {
	t.Helper()
	return getNode(t, f, node).ResourceVersion
}

func getNode(t *testing.T, f *testbed.Fleet, node string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	return &n
}

// kubeletConditions counts the Node's conditions other than ImagesWarm:
// no kubelet runs on the bed's simulated nodes, so any is the agent's.
func kubeletConditions(t *testing.T, f *testbed.Fleet, node string) int {
	t.Helper()
	n := 0
	for _, c := range getNode(t, f, node).Status.Conditions {
		if c.Type != warmv1.ConditionImagesWarm {
			n++
		}
	}
	return n
}

// waitLabel waits until the Node carries key: "true", or lacks key.
func waitLabel(t *testing.T, f *testbed.Fleet, node, key string, want bool) {
	t.Helper()
	testbed.Eventually(t, 90*time.Second, fmt.Sprintf("%s on %s: %v", key, node, want), func() error {
		v, ok := nodeLabels(t, f, node)[key]
		if ok != want || (want && v != warmv1.NodeLabelValue) {
			return fmt.Errorf("label %s=%q (present %v)", key, v, ok)
		}
		return nil
	})
}

// waitCondition waits for the Node's ImagesWarm condition to have status
// and reason, and returns it.
func waitCondition(t *testing.T, f *testbed.Fleet, node string, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
	t.Helper()
	var got corev1.NodeCondition
	testbed.Eventually(t, 90*time.Second, fmt.Sprintf("ImagesWarm %s %s on %s", status, reason, node), func() error {
		for _, c := range getNode(t, f, node).Status.Conditions {
			if c.Type == warmv1.ConditionImagesWarm {
				got = c
				if c.Status == status && c.Reason == reason {
					return nil
				}
				return fmt.Errorf("ImagesWarm %s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("no ImagesWarm condition")
	})
	return got
}

// updateWarm changes an ImageWarm's spec as the admin, retrying conflicts
// with the controller's status writes.
func updateWarm(t *testing.T, f *testbed.Fleet, name string, change func(*warmv1.ImageWarm)) {
	t.Helper()
	testbed.Eventually(t, 10*time.Second, "update ImageWarm "+name, func() error {
		iw := f.ImageWarm(t, ns, name)
		change(iw)
		return f.CP.Client.Update(context.Background(), iw)
	})
}

// patchLabels merges labels into a Node's as the admin.
func patchLabels(t *testing.T, f *testbed.Fleet, node string, labels map[string]any) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CP.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		client.RawPatch(types.MergePatchType, data)); err != nil {
		t.Fatal(err)
	}
}

// labelWatch records, from a watch of one Node, whether it carried the
// label at each change.
type labelWatch struct {
	mu   sync.Mutex
	seen []bool
}

// watchLabel starts recording the label's presence on node until the test
// ends; the first entry is the Node as the watch found it.
func watchLabel(t *testing.T, f *testbed.Fleet, node, key string) *labelWatch {
	t.Helper()
	c, err := client.NewWithWatch(f.CP.Config, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, &corev1.NodeList{}, client.MatchingFields{"metadata.name": node})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	lw := &labelWatch{}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Error {
				continue
			}
			_, has := n.Labels[key]
			lw.mu.Lock()
			if len(lw.seen) == 0 || lw.seen[len(lw.seen)-1] != has {
				lw.seen = append(lw.seen, has)
			}
			lw.mu.Unlock()
		}
	}()
	return lw
}

// wentAndCame says whether the label was seen, then gone, then back.
func (lw *labelWatch) wentAndCame() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if !slices.Equal(lw.seen, []bool{true, false, true}) {
		return fmt.Errorf("label seen as %v, want [true false true]", lw.seen)
	}
	return nil
}
