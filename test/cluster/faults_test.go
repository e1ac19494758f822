package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// The fault matrix on the real node with warmer installed as a user
// installs it: the shipped manifests through the bed's layer, the agent a
// Pod of the pushed release image. Each fault strikes while an ImageWarm
// of six images is half warm (three present, three on their way, slowed
// by the fault proxy in front of the registry), and each must lose
// nothing: every image present again, none pulled again that was present
// when the fault struck, the ImageWarm Ready, the NodeWarm's runtime
// condition True. The time from the fault's end to the ImageWarm's Ready
// is logged on a line starting "recovery:" for docs/reliability.md. The
// last row, the kubelet's image garbage collector with the disk over its
// threshold, has its own ImageWarms (faults_gc_test.go).

const (
	// faultImages is how many images each fault's ImageWarm asks for:
	// twice the agent's default parallel pulls, so that half are present
	// and half in flight when the fault strikes.
	faultImages = 6
	// faultLayer is each image's size, and faultRate the rate the proxy
	// sends it at: about 6 s a pull.
	faultLayer = 3 * testbed.MB
	faultRate  = 512 << 10
	// faultReadyWithin bounds each fault's recovery: the agent's back-off
	// (10 s) and the pulls cut, well below the controller's lease (60 s).
	faultReadyWithin = 45 * time.Second
)

// TestFaultsWithAgentPod installs warmer from its pushed image and runs the
// faults one after the other on the shared node.
func TestFaultsWithAgentPod(t *testing.T) {
	layer := deployLayer(t, pushWarmerImage(t))
	t.Cleanup(func() { _, _ = node.Kubectl(t, "delete", "-k", layer, "--ignore-not-found", "--timeout=3m") })
	kubectl(t, "apply", "-k", layer)
	waitWorkloads(t)

	t.Run("KubeletRestarted", func(t *testing.T) {
		before := agentPod(t)
		f := strikeMidWarm(t, faultCase{name: "kubelet"}, func(t *testing.T) {
			node.StopKubelet()
			time.Sleep(2 * time.Second)
			node.StartKubelet(t)
		})
		// The kubelet stopping leaves its pods running, and a kubelet
		// that starts again adopts them: nothing was cut.
		checkSameAgent(t, before)
		f.checkPulledOnce(t)
	})
	t.Run("ContainerdRestarted", func(t *testing.T) {
		before := agentPod(t)
		strikeMidWarm(t, faultCase{name: "containerd"}, func(t *testing.T) {
			node.Containerd.Stop()
			time.Sleep(2 * time.Second)
			node.Containerd.Start()
		})
		// containerd's shims keep the containers while it is down.
		checkSameAgent(t, before)
	})
	t.Run("AgentPodDeleted", func(t *testing.T) {
		before := agentPod(t)
		strikeMidWarm(t, faultCase{name: "agentpod", newAgent: true}, func(t *testing.T) {
			if err := node.Client.Delete(context.Background(), before); err != nil {
				t.Fatal(err)
			}
		})
		if after := agentPod(t); after.UID == before.UID {
			t.Errorf("the agent pod %s was not replaced", before.Name)
		}
	})
	t.Run("NodeRebooted", func(t *testing.T) {
		before := agentPod(t)
		strikeMidWarm(t, faultCase{name: "reboot", newAgent: true, agentKilled: true}, func(t *testing.T) {
			node.PowerCycle(t, 3*time.Second)
		})
		after := agentPod(t)
		if after.UID != before.UID || containerID(t, after) == containerID(t, before) {
			t.Errorf("after the reboot the kubelet should run the same agent Pod in a new container: before %s/%s, after %s/%s",
				before.UID, containerID(t, before), after.UID, containerID(t, after))
		}
		checkNoStartupTaint(t)
	})
	// Last: the collector takes every unused image on the node, other
	// tests' too.
	t.Run("ImageGCOverThreshold", imageGCOverThreshold)

	kubectl(t, "delete", "-k", layer, "--timeout=3m")
	checkUninstalled(t, "-k", layer)
}

// struck is what strikeMidWarm saw of one fault.
type struck struct {
	refs []string
	// created and at are containerd's log marks (pullLogMark) when the
	// ImageWarm was created and when the fault struck.
	created, at int64
}

// faultCase says what a fault does to the agent.
type faultCase struct {
	name string
	// newAgent: the fault replaces the agent's container.
	newAgent bool
	// agentKilled: the agent dies without a last word (SIGKILL, power
	// lost), so the images whose arrival it had not reported yet (its
	// reports are spaced while pulls run) carry no proof for the next
	// agent, which checks each with the registry once (docs/security.md).
	// A stopped agent reports them as it stops.
	agentKilled bool
}

// strikeMidWarm creates an ImageWarm of faultImages slowed images, waits
// until half are present, runs fault, which returns once the fault is over,
// and checks that the warm recovers without repeating a pull.
func strikeMidWarm(t *testing.T, c faultCase, fault func(t *testing.T)) *struck {
	name := c.name
	t.Helper()
	slow.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: faultRate})
	t.Cleanup(slow.Pass)
	s := &struck{created: pullLogMark(t)}
	for i := range faultImages {
		repo := fmt.Sprintf("faults/%s-%d:v1", name, i)
		reg.PushRandom(t, repo, testbed.ImageOptions{LayerSize: faultLayer})
		s.refs = append(s.refs, slowMirrored+"/"+repo)
	}
	t.Cleanup(func() {
		for _, ref := range s.refs {
			removeImage(t, ref)
		}
	})
	ns := namespace(t)
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fault"},
		Spec:       warmv1.ImageWarmSpec{Images: imageRefs(s.refs)},
	}
	if err := node.Client.Create(context.Background(), iw); err != nil {
		t.Fatal(err)
	}
	var present []string
	cri := node.Containerd.ImageService(t)
	poll(t, 2*time.Minute, "half the images present", func() error {
		present = presentOnNode(cri, s.refs)
		if len(present) < faultImages/2 || len(present) == faultImages {
			return fmt.Errorf("%d of %d present", len(present), faultImages)
		}
		return nil
	})
	// An image containerd holds may not have had its CRI answer reach the
	// agent yet, and without it the image carries no proof for the agent
	// (it checks it once more with the registry): the fault strikes a
	// second later, and the images present then that were not before
	// count as in flight. (A containerd restart within that moment once
	// cost a present image such a check.)
	time.Sleep(time.Second)
	s.at = pullLogMark(t)
	reported := reportedVerified(t)
	old := containerID(t, agentPod(t))
	start := time.Now()
	fault(t)
	over := time.Now()
	agentBack := agentReadySince(t, old, c.newAgent)
	reportedAll := waitNodeWarmPresent(t, s.refs)
	ready := waitWarmReady(t, client.ObjectKeyFromObject(iw))
	// A new connection: the old one may wait out gRPC's back-off after a
	// runtime restart.
	now := presentOnNode(node.Containerd.ImageService(t), s.refs)
	if left := slices.DeleteFunc(slices.Clone(s.refs), func(r string) bool { return slices.Contains(now, r) }); len(left) > 0 {
		t.Errorf("not on the node after the ImageWarm was Ready: %v", left)
	}
	again := pullsInLog(t, s.at)
	maps.DeleteFunc(again, func(ref string, _ int) bool { return !slices.Contains(s.refs, ref) })
	// The controller leads again at once when it restarts in its own Pod
	// (its Lease is held under the Pod's name): within the lease's 60 s.
	if took := ready.Sub(over); took > faultReadyWithin {
		t.Errorf("the ImageWarm was Ready %v after the fault ended, want within %v", took.Round(time.Second), faultReadyWithin)
	}
	checked, nReported := 0, 0
	for _, ref := range present {
		if reported[ref] {
			nReported++
		}
		switch {
		case c.agentKilled && !reported[ref] && again[ref] <= 1:
			checked += again[ref] // the one check with the registry
		case again[ref] > 0:
			t.Errorf("%s was present when the fault struck (reported: %v) and was pulled again %d times", ref, reported[ref], again[ref])
		}
	}
	agentSaid := "the agent stayed Ready"
	if agentBack.After(start) {
		agentSaid = fmt.Sprintf("the agent Ready again %.1fs after it ended", agentBack.Sub(over).Seconds())
	}
	t.Logf("recovery: %s: fault lasted %.1fs with %d of %d images present (%d reported); %s; the NodeWarm reported every image Present %.1fs and the ImageWarm was Ready %.1fs after it ended; CRI pulls of its images after it struck: %d, for the %d images in flight and %d checks of present images not reported (by image: %v)",
		name, over.Sub(start).Seconds(), len(present), len(s.refs), nReported, agentSaid, reportedAll.Sub(over).Seconds(), ready.Sub(over).Seconds(),
		sumCounts(again), faultImages-len(present), checked, again)
	return s
}

// reportedVerified is the images the node's NodeWarm reports Present with
// the proof that their entry's credentials brought them.
func reportedVerified(t *testing.T) map[string]bool {
	t.Helper()
	var nw warmv1.NodeWarm
	if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &nw); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, img := range nw.Status.Images {
		if img.State == warmv1.ImagePresent && img.Verified {
			out[img.Image] = true
		}
	}
	return out
}

// checkPulledOnce checks that each image had exactly one CRI pull: a fault
// that cut no pull must not cause another.
func (s *struck) checkPulledOnce(t *testing.T) {
	t.Helper()
	pulls := pullsInLog(t, s.created)
	for _, ref := range s.refs {
		if pulls[ref] != 1 {
			t.Errorf("%s: %d CRI pulls, want 1", ref, pulls[ref])
		}
	}
}

// imageRefs converts references for an ImageWarm's spec.
func imageRefs(refs []string) []warmv1.ImageReference {
	out := make([]warmv1.ImageReference, len(refs))
	for i, r := range refs {
		out[i] = warmv1.ImageReference(r)
	}
	return out
}

// presentOnNode is which of refs the node's runtime holds.
func presentOnNode(cri runtimeapi.ImageServiceClient, refs []string) []string {
	var out []string
	for _, ref := range refs {
		st, err := cri.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err == nil && st.Image != nil {
			out = append(out, ref)
		}
	}
	return out
}

// pullsInLog counts the CRI pulls containerd logged after mark (see
// pullLogMark), by reference.
func pullsInLog(t *testing.T, mark int64) map[string]int {
	t.Helper()
	b, err := os.ReadFile(containerdLog())
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, m := range pullRequest.FindAllSubmatch(b[mark:], -1) {
		counts[string(m[1])]++
	}
	return counts
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// waitWarmReady waits for an ImageWarm to be Ready and returns when the
// test saw it so.
func waitWarmReady(t *testing.T, key client.ObjectKey) time.Time {
	t.Helper()
	poll(t, 3*time.Minute, "ImageWarm "+key.String()+" Ready", func() error {
		var iw warmv1.ImageWarm
		if err := node.Client.Get(context.Background(), key, &iw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) {
			return fmt.Errorf("nodes %+v", iw.Status.Nodes)
		}
		return nil
	})
	return time.Now()
}

// agentReadySince waits for the agent Pod to be Ready, in a container other
// than old when newAgent is set, and returns since when it is, by its Ready
// condition.
func agentReadySince(t *testing.T, old string, newAgent bool) time.Time {
	t.Helper()
	var since time.Time
	poll(t, 3*time.Minute, "the agent Pod Ready", func() error {
		var pods corev1.PodList
		err := node.Client.List(context.Background(), &pods, client.InNamespace(installNamespace),
			client.MatchingLabels{"app.kubernetes.io/name": "warmer", "app.kubernetes.io/component": "agent"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if len(p.Status.ContainerStatuses) != 1 || newAgent && strings.HasSuffix(p.Status.ContainerStatuses[0].ContainerID, "://"+old) {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					since = c.LastTransitionTime.Time
					return nil
				}
			}
		}
		return fmt.Errorf("no Ready agent pod among %d", len(pods.Items))
	})
	return since
}

// checkSameAgent checks that the agent Pod runs on in the container it had
// before the fault.
func checkSameAgent(t *testing.T, before *corev1.Pod) {
	t.Helper()
	after := agentPod(t)
	if after.UID != before.UID || containerID(t, after) != containerID(t, before) ||
		after.Status.ContainerStatuses[0].RestartCount != before.Status.ContainerStatuses[0].RestartCount {
		t.Errorf("the agent's container did not run through the fault: before %s/%s (%d restarts), after %s/%s (%d)",
			before.Name, containerID(t, before), before.Status.ContainerStatuses[0].RestartCount,
			after.Name, containerID(t, after), after.Status.ContainerStatuses[0].RestartCount)
	}
}

// waitNodeWarmPresent waits for the node's report to say, once a fault is
// over, that the runtime answers and each of refs is Present, and returns
// when the test saw it so.
func waitNodeWarmPresent(t *testing.T, refs []string) time.Time {
	t.Helper()
	poll(t, 3*time.Minute, "the NodeWarm reporting every image Present", func() error {
		var nw warmv1.NodeWarm
		if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &nw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(nw.Status.Conditions, warmv1.ConditionRuntimeReady) {
			return fmt.Errorf("conditions %+v", nw.Status.Conditions)
		}
		for _, ref := range refs {
			i := slices.IndexFunc(nw.Status.Images, func(im warmv1.NodeImage) bool { return im.Image == ref })
			if i < 0 || nw.Status.Images[i].State != warmv1.ImagePresent {
				return fmt.Errorf("%s not Present in %+v", ref, nw.Status.Images)
			}
		}
		return nil
	})
	return time.Now()
}

// checkNoStartupTaint checks that a reboot left the Node without warmer's
// startup taint: the kubelet adds its registration taints only when it
// creates the Node, and a rebooted node keeps its Node object.
func checkNoStartupTaint(t *testing.T) {
	t.Helper()
	var n corev1.Node
	if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &n); err != nil {
		t.Fatal(err)
	}
	for _, taint := range n.Spec.Taints {
		if strings.HasPrefix(taint.Key, agent.DefaultStartupTaintKey) {
			t.Errorf("the rebooted node carries %v", taint)
		}
	}
}
