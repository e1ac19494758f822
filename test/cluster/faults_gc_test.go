package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// The kubelet's image garbage collector with the disk over its threshold,
// the agent a Pod. As in test/gc, the kubelet is made to collect within
// seconds through its eviction manager: restarted with an imagefs and
// nodefs threshold above what the disk has free and a minimum image age of
// 1 s, it deletes every unused, unpinned image every 10 s and evicts the
// pods it may (not the agent, which runs at system-node-critical; the
// controller, which runs at no priority class, is evicted and comes back
// once the pressure ends). Then the kubelet is restarted with its own
// configuration, the disk no longer "full".

// overThreshold is the kubelet configuration that puts the node's disk
// over the kubelet's thresholds (see above).
var overThreshold = testbed.CollectingKubeletConfig()

// shippedBackOff is the shipped agent's back-off for an image the
// collector keeps taking (--image-pull-backoff-initial and -max).
var shippedBackOff = testbed.AgentSettings{BackOffInitial: 10 * time.Second, BackOffMax: 300 * time.Second}

// shippedResync is the shipped agent's --resync-period: how late it may
// notice that an image was removed.
const shippedResync = time.Minute

// gcImages is how many images each of the two ImageWarms asks for.
const gcImages = 2

// imageGCOverThreshold warms images Pinned and Unpinned, puts the disk
// over the kubelet's threshold until the collector has taken every
// unpinned image and the agent has seen it, and brings the disk back.
// Nothing may be lost: the pinned images never leave and are never pulled
// again; the unpinned ones come back, pulled no more often than the
// back-off allows; the agent's container runs through; both ImageWarms are
// Ready again.
func imageGCOverThreshold(t *testing.T) {
	ns := namespace(t)
	node.AllowClusterLevers(t, ns) // Pinned is a cluster lever
	kept, loose := pushGCImages(t, "kept"), pushGCImages(t, "loose")
	keptWarm := gcWarm(t, ns, "gc-kept", warmv1.RetentionPinned, kept)
	looseWarm := gcWarm(t, ns, "gc-loose", warmv1.RetentionUnpinned, loose)
	waitWarmReady(t, keptWarm)
	waitWarmReady(t, looseWarm)
	cri := node.Containerd.ImageService(t)
	poll(t, time.Minute, "the Pinned ImageWarm's images pinned in the runtime", func() error {
		for _, ref := range kept {
			st, err := cri.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			if err != nil || !st.GetImage().GetPinned() {
				return fmt.Errorf("%s: %w, pinned %v", ref, err, st.GetImage().GetPinned())
			}
		}
		return nil
	})

	before, ctrlBefore := agentPod(t), controllerPod(t)
	mark := pullLogMark(t)
	start := time.Now()
	restored := false
	t.Cleanup(func() {
		if !restored {
			node.ReconfigureKubelet(t, nil)
		}
	})
	node.ReconfigureKubelet(t, overThreshold)
	taken := watchCollector(t, kept, loose, mark)
	over := time.Now()
	node.ReconfigureKubelet(t, nil)
	restored = true

	all := append(slices.Clone(kept), loose...)
	onNode := waitOnNode(t, all)
	reportedAll := waitNodeWarmPresent(t, all)
	// The controller may have been evicted while the ImageWarms' status
	// stood: Ready counts once a controller runs again.
	waitWorkloads(t)
	ctrlBack := time.Now()
	waitWarmReady(t, keptWarm)
	ready := waitWarmReady(t, looseWarm) // both Ready by now
	checkSameAgent(t, before)
	checkNoStartupTaint(t)

	pulls := pullsInLog(t, mark)
	maps.DeleteFunc(pulls, func(ref string, _ int) bool { return !slices.Contains(kept, ref) && !slices.Contains(loose, ref) })
	for _, ref := range kept {
		if pulls[ref] > 0 {
			t.Errorf("%s, pinned, was pulled %d times while the collector ran", ref, pulls[ref])
		}
	}
	allowed := pullsAllowed(time.Since(start))
	for _, ref := range loose {
		if pulls[ref] < 1 || pulls[ref] > allowed {
			t.Errorf("%s, collected, was pulled %d times in %v: want 1 to %d (the back-off's windows)", ref, pulls[ref], time.Since(start).Round(time.Second), allowed)
		}
	}
	// An agent that missed the last removal sees it at its next resync
	// and may wait out a back-off window: that, not a fault, bounds it.
	within := faultReadyWithin + shippedResync
	if took := later(ready, onNode).Sub(over); took > within {
		t.Errorf("the ImageWarms were Ready %v after the disk was back under the threshold, want within %v", took.Round(time.Second), within)
	}
	ctrlSaid := "the controller's Pod ran through"
	if ctrlAfter := controllerPod(t); ctrlAfter.UID != ctrlBefore.UID {
		ctrlSaid = fmt.Sprintf("the controller's Pod was stopped by the kubelet (%s) and replaced, available again %.1fs after the disk was back",
			podEnd(t, ctrlBefore), ctrlBack.Sub(over).Seconds())
	}
	t.Logf("recovery: imagegc: the disk over the kubelet's threshold for %.1fs; the collector took the Unpinned images %d times in all and the Pinned never; %s; the agent ran through; every image on the node %.1fs, the NodeWarm reporting them Present %.1fs and both ImageWarms Ready %.1fs after the disk was back; CRI pulls since the disk went over: %d (by image: %v; at most %d an image allowed)",
		over.Sub(start).Seconds(), taken, ctrlSaid, onNode.Sub(over).Seconds(), reportedAll.Sub(over).Seconds(), ready.Sub(over).Seconds(), sumCounts(pulls), pulls, allowed)
}

// pushGCImages pushes gcImages small images named for what their
// ImageWarm keeps, and returns them under their public name; the node
// drops them when the test ends.
func pushGCImages(t *testing.T, kind string) []string {
	t.Helper()
	var refs []string
	for i := range gcImages {
		repo := fmt.Sprintf("gc/%s-%d:v1", kind, i)
		reg.PushRandom(t, repo, testbed.ImageOptions{LayerSize: testbed.MB})
		refs = append(refs, mirrored+"/"+repo)
	}
	t.Cleanup(func() {
		for _, ref := range refs {
			removeImage(t, ref)
		}
	})
	return refs
}

// gcWarm creates an ImageWarm of refs with retention r, and returns its key.
func gcWarm(t *testing.T, ns, name string, r warmv1.Retention, refs []string) client.ObjectKey {
	t.Helper()
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       warmv1.ImageWarmSpec{Images: imageRefs(refs), Retention: r},
	}
	if err := node.Client.Create(context.Background(), iw); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(iw)
}

// watchCollector polls the runtime while the disk is over the threshold,
// failing at once if a kept image leaves, until the collector has taken
// every loose image at least once and the agent has pulled each again
// since mark; it returns how many removals it saw. The kubelet's eviction
// manager took from 10 s to over a minute to collect after its restart
// here, and the agent sees a removal at its next resync.
func watchCollector(t *testing.T, kept, loose []string, mark int64) int {
	t.Helper()
	cri := node.Containerd.ImageService(t)
	gone, removals := map[string]bool{}, 0
	was := presentOnNode(cri, loose)
	within := 2*time.Minute + shippedResync
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if now := presentOnNode(cri, kept); len(now) != len(kept) {
			t.Fatalf("a Pinned image was collected: present %v of %v", now, kept)
		}
		now := presentOnNode(cri, loose)
		for _, ref := range was {
			if !slices.Contains(now, ref) {
				gone[ref] = true
				removals++
			}
		}
		was = now
		pulled := pullsInLog(t, mark)
		if len(gone) == len(loose) && !slices.ContainsFunc(loose, func(ref string) bool { return pulled[ref] == 0 }) {
			return removals
		}
	}
	t.Fatalf("in %v the collector took %v of %v, and the agent pulled %v again: is the kubelet collecting?\n%s",
		within, slices.Collect(maps.Keys(gone)), loose, pullsInLog(t, mark), node.KubeletLog(40))
	return removals
}

// waitOnNode waits until the runtime holds every one of refs, and returns
// when the test saw it so: the NodeWarm may still say Present of an image
// the collector took until the agent's next look (--resync-period).
func waitOnNode(t *testing.T, refs []string) time.Time {
	t.Helper()
	cri := node.Containerd.ImageService(t)
	poll(t, 3*time.Minute, "every image on the node", func() error {
		if now := presentOnNode(cri, refs); len(now) != len(refs) {
			return fmt.Errorf("present %v of %v", now, refs)
		}
		return nil
	})
	return time.Now()
}

// pullsAllowed is how many pulls of one collected image the back-off lets
// the agent make in d: the first at once, then one a window, each window
// as short as jitter may make it.
func pullsAllowed(d time.Duration) int {
	n := 1
	for sum := shippedBackOff.EarliestBackOff(1); sum <= d; sum += shippedBackOff.EarliestBackOff(n) {
		n++
	}
	return n
}

// controllerPod is the install's controller Pod that is not terminating.
func controllerPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods := installedPods(t, "controller")
	if len(pods) != 1 {
		t.Fatalf("want one controller pod, have %d", len(pods))
	}
	return &pods[0]
}

// podEnd is the pod's phase and why the kubelet stopped it (its
// DisruptionTarget condition), or that it is gone.
func podEnd(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	var p corev1.Pod
	if err := node.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
		return "since deleted"
	}
	end := fmt.Sprintf("phase %s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			end += fmt.Sprintf(", %s: %s", c.Reason, c.Message)
		}
	}
	return end
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
