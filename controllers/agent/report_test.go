package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const trueNode = "node-true"

// TestReportsStayTrue runs the agent on real parts (kube-apiserver,
// containerd, a registry) and checks that what it reports follows what
// happens to its NodeWarm, its Node and its pulls, rather than what it
// remembers.
func TestReportsStayTrue(t *testing.T) {
	regs := testbed.StartRegistries(t)
	f := testbed.StartFleet(t, map[string]map[string]string{trueNode: nil}, testbed.FleetOptions{})
	ctx := context.Background()
	whole := t // objects that outlive a subtest are cleaned up with the test
	a := regs.Anon.PushRandom(t, "true/a:v1", testbed.ImageOptions{LayerSize: 64 << 10})
	b := regs.Anon.PushRandom(t, "true/b:v1", testbed.ImageOptions{LayerSize: 64 << 10})
	f.Create(t, build.ImageWarm("default", "pair", build.Images(a.Ref, b.Ref)))
	present := func() error {
		for _, ref := range []string{a.Ref, b.Ref} {
			if img, err := f.NodeImage(trueNode, ref); err != nil || img.State != warmv1.ImagePresent {
				return fmt.Errorf("%s: %+v: %w", ref, img, err)
			}
		}
		return nil
	}
	testbed.Eventually(t, 60*time.Second, "both images present", present)

	t.Run("one Warmed event, counting both pulls", func(t *testing.T) {
		testbed.Eventually(t, 30*time.Second, "a Warmed event", func() error {
			evs := f.Events(t, "default", "pair", "Warmed")
			if len(evs) != 1 || !strings.Contains(evs[0].Note, "pulled 2 ") || evs[0].Series != nil {
				return fmt.Errorf("%d Warmed events: %+v", len(evs), evs)
			}
			return nil
		})
	})

	t.Run("a NodeWarm deleted by hand is written again", func(t *testing.T) {
		nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: trueNode}}
		if err := f.CP.Client.Delete(ctx, nw); err != nil {
			t.Fatal(err)
		}
		// The agent's resync is 3 s here; before, the agent never noticed.
		testbed.Eventually(t, 10*time.Second, "the NodeWarm back, with both images", present)
		// Written at once with everything settled, it is not written again:
		// the server's copy of a status has its times cut to the second,
		// and the next pass, comparing it with the agent's own, wrote the
		// same status once more.
		// The image filesystem's level is part of the status, and this
		// machine's disk fills and empties with the builds and tests
		// around it: a write that reports a moved level is not a repeat.
		n := f.Nodes[trueNode]
		before := n.Metric(t, "warmer_nodewarm_writes_total", `result="ok"`)
		was := nodeWarmStatus(t, f)
		time.Sleep(4 * testbed.DefaultAgent.Resync)
		if after := n.Metric(t, "warmer_nodewarm_writes_total", `result="ok"`); after != before {
			if now := nodeWarmStatus(t, f); equality.Semantic.DeepEqual(withoutDiskLevel(was), withoutDiskLevel(now)) &&
				!equality.Semantic.DeepEqual(was, now) {
				t.Logf("%v NodeWarm writes, each for a moved disk level", after-before)
			} else {
				t.Errorf("%v NodeWarm writes with nothing changed:\nbefore %+v\nafter  %+v", after-before, was, now)
			}
		}
	})

	t.Run("a replaced Node becomes the NodeWarm's owner", func(t *testing.T) { replaceNode(t, whole, f) })
	t.Run("an image whose pull failed is not present, even when the runtime lists it", func(t *testing.T) {
		failedButListed(t, regs, f)
	})
}

// replaceNode deletes the Node and creates it again (a new UID): the
// NodeWarm must take the new one as owner. The new Node lives as long as
// the whole test.
func replaceNode(t, whole *testing.T, f *testbed.Fleet) {
	ctx := context.Background()
	var old corev1.Node
	if err := f.CP.Client.Get(ctx, types.NamespacedName{Name: trueNode}, &old); err != nil {
		t.Fatal(err)
	}
	if err := f.CP.Client.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 10*time.Second, "the old Node gone", func() error {
		err := f.CP.Client.Get(ctx, types.NamespacedName{Name: trueNode}, &corev1.Node{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})
	node := f.CP.CreateNode(whole, trueNode, nil)
	if node.UID == old.UID {
		t.Fatal("the new Node has the old UID")
	}
	testbed.Eventually(t, 10*time.Second, "the NodeWarm owned by the new Node", func() error {
		var nw warmv1.NodeWarm
		if err := f.CP.Client.Get(ctx, types.NamespacedName{Name: trueNode}, &nw); err != nil {
			return err
		}
		if len(nw.OwnerReferences) != 1 || nw.OwnerReferences[0].UID != node.UID {
			return fmt.Errorf("owners %+v, want the Node %s", nw.OwnerReferences, node.UID)
		}
		return nil
	})
}

// failedButListed gives the node an image whose pull fails after
// containerd recorded it: it must not be reported present.
func failedButListed(t *testing.T, regs testbed.Registries, f *testbed.Fleet) {
	// An OCI artifact (empty config media type) whose config names no
	// layer while its manifest has one: containerd fetches it, fails to
	// unpack it ("mismatched image rootfs and manifest layers"), and on
	// 1.6 keeps the image record, which CRI then lists.
	img := testbed.RandomImage(t, testbed.ImageOptions{LayerSize: 16 << 10})
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.RootFS.DiffIDs = nil
	broken, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	broken = mutate.MediaType(broken, ggcrtypes.OCIManifestSchema1)
	broken = mutate.ConfigMediaType(broken, "application/vnd.oci.empty.v1+json")
	art := regs.Anon.Push(t, "true/artifact:v1", broken)
	f.Create(t, build.ImageWarm("default", "artifact", build.Images(art.Ref)))
	node := f.Nodes[trueNode]
	testbed.Eventually(t, 60*time.Second, "the failed pull reported", func() error {
		got, err := f.NodeImage(trueNode, art.Ref)
		if err != nil || got.State != warmv1.ImageBackOff || got.Attempts < 1 {
			return fmt.Errorf("%+v: %w", got, err)
		}
		return nil
	})
	if !node.Present(t, art.Ref) {
		t.Fatal("the runtime did not keep the record of the image it failed to unpack: the case this test is about did not happen")
	}
	// Three resyncs: long enough for the agent to list the runtime's
	// images again and again.
	time.Sleep(10 * time.Second)
	if got, err := f.NodeImage(trueNode, art.Ref); err != nil || got.State == warmv1.ImagePresent {
		t.Errorf("after the failed pull the NodeWarm says %+v (%v)", got, err)
	}
	iw := f.ImageWarm(t, "default", "artifact")
	if c := meta.FindStatusCondition(iw.Status.Conditions, warmv1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("the ImageWarm of an image that failed is Ready: %+v", c)
	}
	if evs := f.Events(t, "default", "artifact", "Warmed"); len(evs) != 0 {
		t.Errorf("a Warmed event for an image that failed: %q", evs[0].Note)
	}
}

// nodeWarmStatus is the node's NodeWarm status as the API server has it.
func nodeWarmStatus(t *testing.T, f *testbed.Fleet) warmv1.NodeWarmStatus {
	t.Helper()
	var nw warmv1.NodeWarm
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Name: trueNode}, &nw); err != nil {
		t.Fatal(err)
	}
	return nw.Status
}

// withoutDiskLevel is st without what the image filesystem's level moves:
// its figures and the DiskPressure condition.
func withoutDiskLevel(st warmv1.NodeWarmStatus) warmv1.NodeWarmStatus {
	st = *st.DeepCopy()
	st.ImageFilesystem = nil
	meta.RemoveStatusCondition(&st.Conditions, warmv1.ConditionDiskPressure)
	return st
}
