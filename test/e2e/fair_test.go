package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestTenantsShareANode runs a worker and a control-plane node, with the
// shipped admission policies: an ImageWarm without a selector warms the
// worker alone and is Ready, one whose namespace may select the
// control-plane role warms that node; and a namespace that sorts first
// with more ImageWarms than a NodeWarm lists does not keep a later
// namespace's one from getting Ready on the node they share (issue 32).
func TestTenantsShareANode(t *testing.T) {
	regs := testbed.StartRegistries(t)
	cat := regs.LoadCatalog(t, false)
	f := testbed.StartFleet(t, map[string]map[string]string{
		"worker": {"pool": "real"},
		"cp":     {"pool": "real", "node-role.kubernetes.io/control-plane": ""},
	}, testbed.FleetOptions{})
	for _, ns := range []string{"aaa", "zzz", "plain"} {
		f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops", Labels: map[string]string{"warmer.dev/cluster-levers": "allowed"}}})

	t.Run("no selector keeps off the control-plane node", func(t *testing.T) {
		f.Create(t, build.ImageWarm("plain", "all", build.Images(cat.Small.Ref)))
		f.Create(t, build.ImageWarm("ops", "cp", build.Images(cat.Layered.Ref), build.MatchLabel("node-role.kubernetes.io/control-plane", "")))
		for _, c := range []struct{ ns, name, node string }{{"plain", "all", "worker"}, {"ops", "cp", "cp"}} {
			if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/"+c.name, "-n", c.ns, "--timeout=120s"); err != nil {
				t.Fatalf("kubectl wait %s/%s: %v\n%s", c.ns, c.name, err, out)
			}
			if n := f.ImageWarm(t, c.ns, c.name).Status.Nodes; n.Matching != 1 || n.Ready != 1 {
				t.Errorf("%s/%s nodes %+v, want %s alone, ready", c.ns, c.name, n, c.node)
			}
		}
		if f.Nodes["cp"].Present(t, cat.Small.Ref) {
			t.Errorf("plain/all's image was pulled on the control-plane node")
		}
	})

	t.Run("a crowd in one namespace does not push another out", func(t *testing.T) {
		sel := build.MatchLabel("pool", "real")
		for i := range warmv1.MaxNodeWarms {
			f.Create(t, build.ImageWarm("aaa", fmt.Sprintf("w%03d", i), build.Images(cat.Small.Ref), sel))
		}
		f.Create(t, build.ImageWarm("zzz", "one", build.Images(cat.Medium.Ref), sel))
		if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/one", "-n", "zzz", "--timeout=180s"); err != nil {
			t.Fatalf("kubectl wait zzz/one: %v\n%s", err, out)
		}
		nw, err := f.NodeWarm("worker")
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionWarmsListed); c == nil || c.Reason != warmv1.ReasonTooManyImageWarms {
			t.Errorf("worker's WarmsListed %+v, want False %s", c, warmv1.ReasonTooManyImageWarms)
		}
		// aaa's last by name is the one left out: unlisted, with a reason,
		// not silent.
		testbed.Eventually(t, 60*time.Second, "aaa/w511 unlisted", func() error {
			st := f.ImageWarm(t, "aaa", "w511").Status
			c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionReady)
			if st.Nodes.Unlisted != 1 || st.Nodes.NotReporting != 0 || c == nil || c.Reason != warmv1.ReasonImagesNotListed {
				return fmt.Errorf("nodes %+v, Ready %+v", st.Nodes, c)
			}
			return nil
		})
	})
}
