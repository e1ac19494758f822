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
	n := f.Nodes[node]
	top := t // the restarted agent outlives the subtest that restarts it
	pulls := func() float64 { return n.Metric(t, "warmer_image_pulls_total", `result="success"`) }

	t.Run("warms, and reports the runtime", func(t *testing.T) {
		f.Create(t, build.ImageWarm(ns, "web", build.Images(cat.Small.Ref, cat.Layered.Ref, cat.MultiArch.Ref, pinnedByCRIO.Ref)))
		waitCondition(t, f, "web", warmv1.ConditionReady, metav1.ConditionTrue, 2*time.Minute)
		if err := n.AllPresent(t, cat.Small.Ref, cat.Layered.Ref, cat.MultiArch.Ref, pinnedByCRIO.Ref); err != nil {
			t.Fatal(err)
		}
		nw, err := f.NodeWarm(node)
		if err != nil {
			t.Fatal(err)
		}
		if nw.Status.Runtime.Name != "cri-o" || nw.Status.Present != 4 {
			t.Errorf("NodeWarm runtime %+v, %d present; want cri-o and 4", nw.Status.Runtime, nw.Status.Present)
		}
		if len(f.Events(t, ns, "web", warmv1.ReasonWarmed)) != 1 {
			t.Errorf("events %v, want one Warmed", f.Events(t, ns, "web", ""))
		}
	})

	// CRI-O pins by its own configuration (pinned_images); it offers no
	// CRI call to pin, so warmer reports what CRI-O pinned and says it
	// cannot pin, and no pull's bytes can be seen.
	t.Run("pinning and pull bytes reported as CRI-O has them", func(t *testing.T) {
		nw, err := f.NodeWarm(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range nw.Status.Images {
			if want := img.Image == pinnedByCRIO.Ref; img.Pinned != want {
				t.Errorf("%s pinned %v, want %v (CRI-O's pinned_images)", img.Image, img.Pinned, want)
			}
		}
		if c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionPinning); c == nil || c.Reason != warmv1.ReasonRuntimeCannotPin {
			t.Errorf("Pinning condition %+v, want %s", c, warmv1.ReasonRuntimeCannotPin)
		}
		if c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionPullProgress); c == nil || c.Status != metav1.ConditionFalse || c.Reason != warmv1.ReasonNoContentView {
			t.Errorf("PullProgress condition %+v, want False %s", c, warmv1.ReasonNoContentView)
		}
	})

	t.Run("IfNotPresent pulls nothing present; Always pulls again", func(t *testing.T) {
		// A restarted agent finds the four images present and pulls none
		// of them; then an ImageWarm with pullPolicy Always pulls one again.
		n.Agent.Stop()
		n.RestartAgent(top)
		testbed.Eventually(t, 30*time.Second, "the restarted agent's metrics", func() error { return scrapes(n) })
		time.Sleep(3 * f.AgentSettings.Resync)
		if got := pulls(); got != 0 {
			t.Errorf("%v successful pulls by the restarted agent, want none: every image is present", got)
		}
		// Always pulls a present image again at its refresh interval
		// (at least a minute), counted from when the agent saw it.
		iw := build.ImageWarm(ns, "always", build.Images(cat.Small.Ref))
		iw.Spec.PullPolicy = warmv1.PullAlways
		iw.Spec.RefreshInterval = &metav1.Duration{Duration: time.Minute}
		f.Create(t, iw)
		testbed.Eventually(t, time.Minute+testbed.SettleMargin, "the Always pull", func() error {
			if got := pulls(); got < 1 {
				return fmt.Errorf("%v successful pulls, want the Always one", got)
			}
			return nil
		})
	})

	t.Run("NotFound, summed up in one Failed event", func(t *testing.T) {
		f.Create(t, build.ImageWarm(ns, "missing", build.Images(regs.Anon.Ref("crio/nope:v1"), regs.Anon.Ref("nope/none:v1"))))
		waitReason(t, f, regs.Anon.Ref("crio/nope:v1"), "NotFound")
		waitReason(t, f, regs.Anon.Ref("nope/none:v1"), "NotFound")
		waitEvent(t, f, "missing", "2 of 2 images failed to pull (NotFound 2)")
	})

	t.Run("Unauthorized, then a fixed secret", func(t *testing.T) {
		f.CP.LendPullSecrets(t, ns)
		f.Create(t, build.DockerConfigSecret(ns, "regcred", regs.Auth.Host, regs.Auth.Username(), "wrong"))
		iw := build.ImageWarm(ns, "private", build.Images(cat.Private.Ref))
		iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
		f.Create(t, iw)
		waitReason(t, f, cat.Private.Ref, "Unauthorized")
		fixed := build.DockerConfigSecret(ns, "regcred", regs.Auth.Host, regs.Auth.Username(), regs.Auth.Password())
		if err := f.CP.Client.Update(context.Background(), fixed); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, time.Minute, "the private image with the fixed secret", func() error { return n.AllPresent(t, cat.Private.Ref) })
	})

	t.Run("an image without this node's platform is NoMatchingPlatform", func(t *testing.T) {
		f.Create(t, build.ImageWarm(ns, "arm", build.Images(cat.ArmOnly.Ref)))
		waitReason(t, f, cat.ArmOnly.Ref, "NoMatchingPlatform")
	})

	t.Run("a registry that is down is RegistryUnavailable", func(t *testing.T) {
		down := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "down"})
		img := down.PushRandom(t, "crio/down:v1", testbed.ImageOptions{LayerSize: testbed.MB})
		down.Stop()
		f.Create(t, build.ImageWarm(ns, "down", build.Images(img.Ref)))
		waitReason(t, f, img.Ref, "RegistryUnavailable")
	})

	t.Run("deleted mid-pull: the pull is cancelled", func(t *testing.T) {
		slow := faults.StartFaultProxy(t, regs.Anon.Host)
		slow.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: 256 << 10})
		img := regs.Anon.PushRandom(t, "crio/slow:v1", testbed.ImageOptions{LayerSize: 16 * testbed.MB})
		ref := strings.Replace(img.Ref, regs.Anon.Host, slow.Host, 1)
		iw := build.ImageWarm(ns, "slow", build.Images(ref))
		f.Create(t, iw)
		testbed.Eventually(t, time.Minute, "the slow pull under way", func() error {
			if slow.Count(faults.FaultSlow) == 0 {
				return fmt.Errorf("no blob asked yet")
			}
			return nil
		})
		before := n.Metric(t, "warmer_image_pulls_total", `result="canceled"`)
		if err := f.CP.Client.Delete(context.Background(), f.ImageWarm(t, ns, "slow")); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 30*time.Second, "the pull cancelled", func() error {
			if got := n.Metric(t, "warmer_image_pulls_total", `result="canceled"`); got <= before {
				return fmt.Errorf("%v cancelled pulls", got-before)
			}
			return nil
		})
		if n.Present(t, ref) {
			t.Errorf("%s present after its pull was cancelled", ref)
		}
	})

	t.Run("the image filesystem is CRI-O's", func(t *testing.T) {
		resp, err := n.CRI.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		fs := resp.GetImageFilesystems()
		if len(fs) == 0 || !strings.HasPrefix(fs[0].GetFsId().GetMountpoint(), n.CRIO.Dir) || fs[0].GetUsedBytes().GetValue() == 0 {
			t.Errorf("ImageFsInfo %v: want CRI-O's image store in its folder, in use", fs)
		}
	})
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
