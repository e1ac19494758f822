package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestReadinessOnAMixedFleet runs two real nodes and one Node without an
// agent (a virtual node): with spec.readiness.minReadyNodes `kubectl wait`
// returns, the status and the NotReporting message name the silent node,
// and a node whose platform an image lacks (the registry serves it for
// arm64 only) is counted apart, not as a failure.
func TestReadinessOnAMixedFleet(t *testing.T) {
	const ns = "readiness"
	regs := testbed.StartRegistries(t)
	cat := regs.LoadCatalog(t, false)
	f := testbed.StartFleet(t, map[string]map[string]string{
		"node-1": {"pool": "real"},
		"node-2": {"pool": "real"},
	}, testbed.FleetOptions{})
	f.CP.CreateNode(t, "virtual-1", map[string]string{"pool": "virtual"})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	t.Run("minReadyNodes lets kubectl wait return despite a silent node", func(t *testing.T) {
		iw := build.ImageWarm(ns, "most", build.Images(cat.Small.Ref))
		most := intstr.FromString("66%")
		iw.Spec.Readiness = &warmv1.Readiness{MinReadyNodes: &most}
		f.Create(t, iw)
		if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/most", "-n", ns, "--timeout=120s"); err != nil {
			t.Fatalf("kubectl wait: %v\n%s", err, out)
		}
		got := f.ImageWarm(t, ns, "most")
		if n := got.Status.Nodes; n.Matching != 3 || n.Ready != 2 || n.NotReporting != 1 {
			t.Errorf("nodes %+v, want 3 matching, 2 ready, 1 not reporting", n)
		}
		if s := got.Status.SilentNodes; len(s) != 1 || s[0].Node != "virtual-1" || s[0].Since.IsZero() {
			t.Errorf("silent nodes %+v, want virtual-1 with a since", s)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, warmv1.ConditionReady)
		if c.Reason != "MinReadyNodesMet" || !strings.Contains(c.Message, "virtual-1") {
			t.Errorf("Ready %s: %s", c.Reason, c.Message)
		}
	})

	t.Run("without it the silent node is named", func(t *testing.T) {
		f.Create(t, build.ImageWarm(ns, "all", build.Images(cat.Small.Ref)))
		testbed.Eventually(t, 60*time.Second, "NotReporting naming virtual-1", func() error {
			c := meta.FindStatusCondition(f.ImageWarm(t, ns, "all").Status.Conditions, warmv1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NotReporting" || !strings.Contains(c.Message, "virtual-1") {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
	})

	t.Run("a platform the image lacks is counted apart", func(t *testing.T) {
		f.Create(t, build.ImageWarm(ns, "arm", build.Images(cat.ArmOnly.Ref), build.MatchLabel("pool", "real")))
		testbed.Eventually(t, 60*time.Second, "both nodes unsupported", func() error {
			st := f.ImageWarm(t, ns, "arm").Status
			if st.Nodes.Unsupported != 2 || st.Nodes.Failed != 0 || len(st.Failures) != 0 {
				return fmt.Errorf("nodes %+v, failures %+v", st.Nodes, st.Failures)
			}
			ready := meta.FindStatusCondition(st.Conditions, warmv1.ConditionReady)
			degraded := meta.FindStatusCondition(st.Conditions, warmv1.ConditionDegraded)
			if ready == nil || ready.Reason != "NoSupportedNodes" || degraded == nil || degraded.Status != metav1.ConditionFalse {
				return fmt.Errorf("Ready %+v, Degraded %+v", ready, degraded)
			}
			return nil
		})
	})
}
