package plugin

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// The fixture's names and its one point in time: every time it writes is
// this, so the golden files hold still.
const (
	shop   = "shop"
	web    = "registry.example/shop/web:v2"
	api    = "registry.example/shop/api:v1"
	webRef = "registry.example/shop/web:v2"
)

var then = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// retry is when a backing-off node of the fixture tries again.
var retry = metav1.NewTime(then.Add(80 * time.Second))

const mib = int64(1) << 20

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: then, ObservedGeneration: 1}
}

// createWithStatus creates o, then writes status into it as the
// controller or an agent would.
func createWithStatus(t testing.TB, c client.Client, o client.Object, setStatus func()) {
	t.Helper()
	if err := writeWithStatus(c, o, setStatus); err != nil {
		t.Fatal(err)
	}
}

// writeWithStatus is createWithStatus for any goroutine.
func writeWithStatus(c client.Client, o client.Object, setStatus func()) error {
	ctx := context.Background()
	if err := c.Create(ctx, o); err != nil {
		return fmt.Errorf("creating %s: %w", o.GetName(), err)
	}
	setStatus()
	if err := c.Status().Update(ctx, o); err != nil {
		return fmt.Errorf("writing the status of %s: %w", o.GetName(), err)
	}
	return nil
}

// createFixture makes ImageWarm shop/web in the middle of a warm over
// seven nodes (one of each kind of progress), and shop/ready, warm.
func createFixture(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	c := cp.Client
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shop}}); err != nil {
		t.Fatal(err)
	}
	w := build.ImageWarm(shop, "web", build.Images(web, api))
	createWithStatus(t, c, w, func() {
		w.Status = warmv1.ImageWarmStatus{
			ObservedGeneration: 1, ImageCount: 2, ServedStarts: 12,
			Nodes: warmv1.NodeCounts{Matching: 8, Ready: 1, Pulling: 5, Failed: 1, NotReporting: 1},
			Conditions: []metav1.Condition{
				cond(warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonNodesFailed, "1 of 8 nodes failed to pull an image"),
				cond(warmv1.ConditionProgressing, metav1.ConditionTrue, warmv1.ReasonPulling, "5 nodes pulling"),
				cond(warmv1.ConditionDegraded, metav1.ConditionTrue, warmv1.ReasonPullFailed, "node-d: NotFound"),
				cond(warmv1.ConditionRollout, metav1.ConditionFalse, warmv1.ReasonWaves, "1 node waits for a slot"),
			},
			Images:      []warmv1.ImageFleetStatus{{Image: web, Ready: 1, Pulling: 5, Failed: 1}},
			Failures:    []warmv1.NodeFailure{{Node: "node-d", Image: web, Reason: warmv1.ReasonNotFound, Message: "not found"}},
			SilentNodes: []warmv1.SilentNode{{Node: "node-f", Since: then}},
			Rollout:     &warmv1.RolloutStatus{Generation: 1, AdmittedBelow: 1 << 31, Admitted: 6, Waiting: 1},
		}
	})
	ready := build.ImageWarm(shop, "ready", build.Images(api))
	createWithStatus(t, c, ready, func() {
		ready.Status = warmv1.ImageWarmStatus{ObservedGeneration: 1, ImageCount: 1, ReadyImages: 1,
			Nodes:      warmv1.NodeCounts{Matching: 1, Ready: 1},
			Conditions: []metav1.Condition{cond(warmv1.ConditionReady, metav1.ConditionTrue, warmv1.ReasonAllNodesWarm, "every matching node has every image")}}
	})
	for _, nw := range fixtureNodes() {
		status := nw.Status
		createWithStatus(t, c, nw, func() { nw.Status = status })
	}
}

func present(img string, warms ...int32) warmv1.NodeImage {
	return warmv1.NodeImage{Image: img, State: warmv1.ImagePresent, Pinned: true, Verified: true, Warms: warms,
		Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
}

func pullingImage(img string, done, total int64, secs *int64) warmv1.NodeImage {
	return warmv1.NodeImage{Image: img, State: warmv1.ImagePulling, Warms: []int32{0}, LastTransitionTime: &then,
		Progress: &warmv1.PullProgress{BytesDone: done * mib, BytesTotal: total * mib, SecondsLeft: secs}}
}

func queued(img, reason string) warmv1.NodeImage {
	return warmv1.NodeImage{Image: img, State: warmv1.ImageQueued, Reason: reason, Warms: []int32{0}, LastTransitionTime: &then}
}

func nodeWarm(name string, images []warmv1.NodeImage, conds ...metav1.Condition) *warmv1.NodeWarm {
	nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: warmv1.NodeWarmStatus{
		Runtime:    warmv1.RuntimeInfo{Name: "containerd", Version: "2.1.4"},
		Warms:      []warmv1.WarmRef{{Namespace: shop, Name: "web", Generation: 1}},
		Images:     images,
		Conditions: append([]metav1.Condition{cond(warmv1.ConditionRuntimeReady, metav1.ConditionTrue, warmv1.ReasonRuntimeAnswering, "")}, conds...),
	}}
	st := &nw.Status
	st.Desired = int32(len(images))
	for _, img := range images {
		switch img.State {
		case warmv1.ImagePresent:
			st.Present++
		case warmv1.ImagePulling, warmv1.ImageQueued:
			st.Pulling++
		default:
			st.Failed++
		}
	}
	return nw
}

// fixtureNodes are shop/web's nodes: warm, pulling fast and slow, without
// a rate, failing, held by a full disk, yielding, waiting for its wave.
func fixtureNodes() []*warmv1.NodeWarm {
	a := nodeWarm("node-a", []warmv1.NodeImage{present(api, 0, 1), present(web, 0)})
	a.Status.Warms = append(a.Status.Warms, warmv1.WarmRef{Namespace: shop, Name: "ready", Generation: 1, ServedStarts: 3})
	a.Status.Warms[0].ServedStarts = 12
	a.Status.ServedStarts = 15
	a.Status.ImageFilesystem = &warmv1.ImageFilesystem{Mountpoint: "/var/lib/containerd", UsedBytes: 3 << 30, CapacityBytes: 100 << 30, UsedPercent: 41}
	return []*warmv1.NodeWarm{
		a,
		nodeWarm("node-b", []warmv1.NodeImage{present(api, 0), pullingImage(web, 40, 100, ptr.To[int64](60))}),
		nodeWarm("node-c", []warmv1.NodeImage{queued(api, ""), pullingImage(web, 90, 100, ptr.To[int64](5))}),
		nodeWarm("node-d", []warmv1.NodeImage{present(api, 0), {Image: web, State: warmv1.ImageBackOff, Reason: warmv1.ReasonNotFound,
			Message: "registry.example/shop/web:v2: not found", Attempts: 3, Warms: []int32{0}, LastTransitionTime: &then, RetryAt: &retry}}),
		nodeWarm("node-e", []warmv1.NodeImage{present(api, 0), queued(web, "")},
			cond(warmv1.ConditionDiskPressure, metav1.ConditionTrue, warmv1.ReasonAboveThreshold, "image filesystem 91% full, above the 85% threshold")),
		nodeWarm("node-g", []warmv1.NodeImage{present(api, 0), queued(web, warmv1.ReasonWaitingForRollout)}),
		nodeWarm("node-h", []warmv1.NodeImage{present(api, 0), pullingImage(web, 10, 100, nil)},
			cond(warmv1.ConditionYielding, metav1.ConditionTrue, warmv1.ReasonRuntimePulling, "the runtime pulls blobs for someone else")),
	}
}
