package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestProofsStayWithTheMachine, on a real API server: a NodeWarm whose
// report an agent on another machine wrote (its Node since replaced under
// the same name, so the owner's UID differs) gives an agent starting on
// the new Node no proof: the images that machine verified are not this
// one's, though the runtime may list an image of the same digest. The
// NodeWarm's old report is cleared before it takes the new Node as owner,
// so an agent restarting in between cannot take it for its own either.
// The NodeWarm of this very Node seeds its proofs.
func TestProofsStayWithTheMachine(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	ctx := context.Background()
	const ref = "registry.test/team/private:v1"
	digest := "sha256:" + strings.Repeat("d", 64)
	report := warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{{Image: ref, State: warmv1.ImagePresent, Verified: true, Digest: digest}}}
	always := plan.Verification{Policy: plan.AlwaysVerify}
	// The runtime lists the image, with the digest the old report names.
	runtime := pullengine.NewPresence([]*runtimeapi.Image{{Id: "sha256:" + strings.Repeat("1", 64), RepoTags: []string{ref},
		RepoDigests: []string{"registry.test/team/private@" + digest}, Size: 1 << 20}})

	for _, c := range []struct {
		name     string
		replaced bool
	}{{"the same Node", false}, {"a Node replaced under the same name", true}} {
		t.Run(c.name, func(t *testing.T) {
			node := cp.CreateNode(t, map[bool]string{false: "node-same", true: "node-new"}[c.replaced], nil)
			owner := node.UID
			if c.replaced {
				owner = types.UID("uid-of-the-old-node")
			}
			nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: node.Name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: owner}}}}
			if err := cp.Client.Create(ctx, nw); err != nil {
				t.Fatal(err)
			}
			nw.Status = report
			if err := cp.Client.Status().Update(ctx, nw); err != nil {
				t.Fatal(err)
			}

			a := &NodeAgent{Client: cp.Client, APIReader: cp.Client, NodeName: node.Name, Verification: always}
			if _, err := a.nodeWarm(ctx, node); err != nil {
				t.Fatal(err)
			}
			d, _ := (&plan.Memo{}).Desired("", node.Labels, []warmv1.ImageWarm{*build.ImageWarm("default", "app", build.Images(ref))}, nil)
			out := plan.Decide(plan.Input{Now: time.Now(), ListedAt: time.Now(), Desired: d, Runtime: runtime, Engine: map[string]pullengine.Status{},
				Disk: pullengine.DiskUsage{Known: true}, Resync: time.Minute, Verification: always, State: a.carry.plan})
			img := out.Status.Images[0]
			if got := img.Verified && img.State == warmv1.ImagePresent; got == c.replaced {
				t.Errorf("entry %s verified=%v from the NodeWarm's report; want verified %v", img.State, img.Verified, !c.replaced)
			}

			var got warmv1.NodeWarm
			if err := cp.Client.Get(ctx, types.NamespacedName{Name: node.Name}, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != node.UID {
				t.Errorf("owners %+v, want the Node %s", got.OwnerReferences, node.UID)
			}
			if wantImages := map[bool]int{false: 1, true: 0}[c.replaced]; len(got.Status.Images) != wantImages {
				t.Errorf("the NodeWarm reports %d images, want %d: %+v", len(got.Status.Images), wantImages, got.Status.Images)
			}
		})
	}
}
