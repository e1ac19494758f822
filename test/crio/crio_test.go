// Package crio runs the agent on CRI-O, the second runtime the README
// names: a real crio (hack/install-crio.sh builds v1.34.0) with Debian's
// conmon and runc, the real registries, the agent binary as shipped, under
// its shipped roles.
package crio

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

const (
	ns   = "crio"
	node = "crio-1"
)

// TestOnCRIO walks one CRI-O node through what the containerd fleets
// show: a warm, IfNotPresent and Always, NotFound, Unauthorized and a
// fixed secret, a registry that is down, a pull cancelled, events, the
// NodeWarm's report, and what it says of pinning and of pulls' bytes,
// which CRI-O does not offer. Steps build on each other, in order.
func TestOnCRIO(t *testing.T) {
	regs := testbed.StartRegistries(t)
	cat := regs.LoadCatalog(t, false)
	pinnedByCRIO := regs.Anon.PushRandom(t, "crio/pinned:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{
		CRIO: true,
		CRIOOpts: func(string) []testbed.CRIOOption {
			return []testbed.CRIOOption{testbed.WithPinnedImages(pinnedByCRIO.Ref)}
		},
	})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	b := &crioBed{top: t, f: f, n: f.Nodes[node], regs: regs, cat: cat, pinned: pinnedByCRIO}
	t.Run("warms, and reports the runtime", b.warms)
	t.Run("pinning and pull bytes reported as CRI-O has them", b.pinningAndBytes)
	t.Run("IfNotPresent pulls nothing present; Always pulls again", b.pullPolicies)
	t.Run("NotFound, summed up in one Failed event", b.notFound)
	t.Run("Unauthorized, then a fixed secret", b.unauthorized)
	t.Run("an image without this node's platform is NoMatchingPlatform", b.noPlatform)
	t.Run("a registry that is down is RegistryUnavailable", b.registryDown)
	t.Run("deleted mid-pull: the pull is cancelled", b.cancelled)
	t.Run("the image filesystem is CRI-O's", b.imageFilesystem)
}

// crioBed is TestOnCRIO's fleet of one CRI-O node, which its steps share.
type crioBed struct {
	// top is the whole test's: the agent a step restarts outlives it.
	top    *testing.T
	f      *testbed.Fleet
	n      *testbed.Node
	regs   testbed.Registries
	cat    testbed.Catalog
	pinned testbed.Image
}

// pulls counts the node's agent's successful pulls since it started.
func (b *crioBed) pulls(t *testing.T) float64 {
	return b.n.Metric(t, "warmer_image_pulls_total", `result="success"`)
}

// warms: warms, and reports the runtime.
func (b *crioBed) warms(t *testing.T) {
	b.f.Create(t, build.ImageWarm(ns, "web", build.Images(b.cat.Small.Ref, b.cat.Layered.Ref, b.cat.MultiArch.Ref, b.pinned.Ref)))
	waitCondition(t, b.f, "web", warmv1.ConditionReady, metav1.ConditionTrue, 2*time.Minute)
	if err := b.n.AllPresent(t, b.cat.Small.Ref, b.cat.Layered.Ref, b.cat.MultiArch.Ref, b.pinned.Ref); err != nil {
		t.Fatal(err)
	}
	nw, err := b.f.NodeWarm(node)
	if err != nil {
		t.Fatal(err)
	}
	if nw.Status.Runtime.Name != "cri-o" || nw.Status.Present != 4 {
		t.Errorf("NodeWarm runtime %+v, %d present; want cri-o and 4", nw.Status.Runtime, nw.Status.Present)
	}
	if len(b.f.Events(t, ns, "web", warmv1.ReasonWarmed)) != 1 {
		t.Errorf("events %v, want one Warmed", b.f.Events(t, ns, "web", ""))
	}
}

// pinningAndBytes: pinning and pull bytes reported as CRI-O has them.
// CRI-O pins by its own configuration (pinned_images); it offers no CRI
// call to pin, so warmer reports what CRI-O pinned and says it cannot
// pin, and no pull's bytes can be seen.
func (b *crioBed) pinningAndBytes(t *testing.T) {
	nw, err := b.f.NodeWarm(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range nw.Status.Images {
		if want := img.Image == b.pinned.Ref; img.Pinned != want {
			t.Errorf("%s pinned %v, want %v (CRI-O's pinned_images)", img.Image, img.Pinned, want)
		}
	}
	if c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionPinning); c == nil || c.Reason != warmv1.ReasonRuntimeCannotPin {
		t.Errorf("Pinning condition %+v, want %s", c, warmv1.ReasonRuntimeCannotPin)
	}
	if c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionPullProgress); c == nil || c.Status != metav1.ConditionFalse || c.Reason != warmv1.ReasonNoContentView {
		t.Errorf("PullProgress condition %+v, want False %s", c, warmv1.ReasonNoContentView)
	}
}

// pullPolicies: IfNotPresent pulls nothing present; Always pulls again.
func (b *crioBed) pullPolicies(t *testing.T) {
	// A restarted agent finds the four images present and pulls none
	// of them; then an ImageWarm with pullPolicy Always pulls one again.
	b.n.Agent.Stop()
	b.n.RestartAgent(b.top)
	testbed.Eventually(t, 30*time.Second, "the restarted agent's metrics", func() error { return scrapes(b.n) })
	time.Sleep(3 * b.f.AgentSettings.Resync)
	if got := b.pulls(t); got != 0 {
		t.Errorf("%v successful pulls by the restarted agent, want none: every image is present", got)
	}
	// Always pulls a present image again at its refresh interval
	// (at least a minute), counted from when the agent saw it.
	iw := build.ImageWarm(ns, "always", build.Images(b.cat.Small.Ref))
	iw.Spec.PullPolicy = warmv1.PullAlways
	iw.Spec.RefreshInterval = &metav1.Duration{Duration: time.Minute}
	b.f.Create(t, iw)
	testbed.Eventually(t, time.Minute+testbed.SettleMargin, "the Always pull", func() error {
		if got := b.pulls(t); got < 1 {
			return fmt.Errorf("%v successful pulls, want the Always one", got)
		}
		return nil
	})
}

// notFound: NotFound, summed up in one Failed event.
func (b *crioBed) notFound(t *testing.T) {
	b.f.Create(t, build.ImageWarm(ns, "missing", build.Images(b.regs.Anon.Ref("crio/nope:v1"), b.regs.Anon.Ref("nope/none:v1"))))
	waitReason(t, b.f, b.regs.Anon.Ref("crio/nope:v1"), "NotFound")
	waitReason(t, b.f, b.regs.Anon.Ref("nope/none:v1"), "NotFound")
	waitEvent(t, b.f, "missing", "2 of 2 images failed to pull (NotFound 2)")
}

// unauthorized: Unauthorized, then a fixed secret.
func (b *crioBed) unauthorized(t *testing.T) {
	b.f.CP.LendPullSecrets(t, ns)
	b.f.Create(t, build.DockerConfigSecret(ns, "regcred", b.regs.Auth.Host, b.regs.Auth.Username(), "wrong"))
	iw := build.ImageWarm(ns, "private", build.Images(b.cat.Private.Ref))
	iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	b.f.Create(t, iw)
	waitReason(t, b.f, b.cat.Private.Ref, "Unauthorized")
	fixed := build.DockerConfigSecret(ns, "regcred", b.regs.Auth.Host, b.regs.Auth.Username(), b.regs.Auth.Password())
	if err := b.f.CP.Client.Update(context.Background(), fixed); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, time.Minute, "the private image with the fixed secret", func() error { return b.n.AllPresent(t, b.cat.Private.Ref) })
}

// noPlatform: an image without this node's platform is NoMatchingPlatform.
func (b *crioBed) noPlatform(t *testing.T) {
	b.f.Create(t, build.ImageWarm(ns, "arm", build.Images(b.cat.ArmOnly.Ref)))
	waitReason(t, b.f, b.cat.ArmOnly.Ref, "NoMatchingPlatform")
}

// registryDown: a registry that is down is RegistryUnavailable.
func (b *crioBed) registryDown(t *testing.T) {
	down := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "down"})
	img := down.PushRandom(t, "crio/down:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	down.Stop()
	b.f.Create(t, build.ImageWarm(ns, "down", build.Images(img.Ref)))
	waitReason(t, b.f, img.Ref, "RegistryUnavailable")
}

// cancelled: deleted mid-pull: the pull is cancelled.
func (b *crioBed) cancelled(t *testing.T) {
	slow := faults.StartFaultProxy(t, b.regs.Anon.Host)
	slow.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: 256 << 10})
	img := b.regs.Anon.PushRandom(t, "crio/slow:v1", testbed.ImageOptions{LayerSize: 16 * testbed.MB})
	ref := strings.Replace(img.Ref, b.regs.Anon.Host, slow.Host, 1)
	iw := build.ImageWarm(ns, "slow", build.Images(ref))
	b.f.Create(t, iw)
	testbed.Eventually(t, time.Minute, "the slow pull under way", func() error {
		if slow.Count(faults.FaultSlow) == 0 {
			return fmt.Errorf("no blob asked yet")
		}
		return nil
	})
	before := b.n.Metric(t, "warmer_image_pulls_total", `result="canceled"`)
	if err := b.f.CP.Client.Delete(context.Background(), b.f.ImageWarm(t, ns, "slow")); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 30*time.Second, "the pull cancelled", func() error {
		if got := b.n.Metric(t, "warmer_image_pulls_total", `result="canceled"`); got <= before {
			return fmt.Errorf("%v cancelled pulls", got-before)
		}
		return nil
	})
	if b.n.Present(t, ref) {
		t.Errorf("%s present after its pull was cancelled", ref)
	}
}

// imageFilesystem: the image filesystem is CRI-O's.
func (b *crioBed) imageFilesystem(t *testing.T) {
	resp, err := b.n.CRI.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	fs := resp.GetImageFilesystems()
	if len(fs) == 0 || !strings.HasPrefix(fs[0].GetFsId().GetMountpoint(), b.n.CRIO.Dir) || fs[0].GetUsedBytes().GetValue() == 0 {
		t.Errorf("ImageFsInfo %v: want CRI-O's image store in its folder, in use", fs)
	}
}

func waitCondition(t *testing.T, f *testbed.Fleet, name, cond string, status metav1.ConditionStatus, within time.Duration) {
	t.Helper()
	testbed.Eventually(t, within, name+" "+cond, func() error {
		c := meta.FindStatusCondition(f.ImageWarm(t, ns, name).Status.Conditions, cond)
		if c == nil || c.Status != status {
			return fmt.Errorf("%s: %+v", cond, c)
		}
		return nil
	})
}

// waitReason waits for the node's entry of ref to fail with reason.
func waitReason(t *testing.T, f *testbed.Fleet, ref, reason string) {
	t.Helper()
	testbed.Eventually(t, time.Minute, ref+" "+reason, func() error {
		img, err := f.NodeImage(node, ref)
		if err != nil {
			return err
		}
		if img.Reason != reason {
			return fmt.Errorf("state %s reason %q: %s", img.State, img.Reason, img.Message)
		}
		return nil
	})
}

// waitEvent waits for a Failed event on the ImageWarm whose note holds
// text.
func waitEvent(t *testing.T, f *testbed.Fleet, name, text string) {
	t.Helper()
	testbed.Eventually(t, 30*time.Second, "Failed event saying "+text, func() error {
		evs := f.Events(t, ns, name, "Failed")
		for _, e := range evs {
			if strings.Contains(e.Note, text) {
				return nil
			}
		}
		return fmt.Errorf("%d Failed events, none saying it", len(evs))
	})
}

// scrapes is nil once the node's agent answers on /metrics.
func scrapes(n *testbed.Node) error {
	resp, err := http.Get("http://" + n.Metrics + "/metrics")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
