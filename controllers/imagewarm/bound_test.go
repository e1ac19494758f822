package imagewarm

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestBoundAheadOfStatus runs the controller with progress writes held
// back for an hour, as a very large fleet would space them, on a rollout
// of one node at a time over three nodes: when the admitted node reports
// every image present, the RolloutBound admits the next node within
// seconds, while the ImageWarm's status still shows the old bound. Agents
// admit themselves by the higher of the two (RolloutAdmits).
func TestBoundAheadOfStatus(t *testing.T) {
	const image = "registry.example/app:v3"
	cp := testbed.StartControlPlane(t)
	startReconciler(t, cp, &Reconciler{MinWriteInterval: time.Hour})
	e := &iwEnv{t: t, cp: cp, key: client.ObjectKey{Namespace: "default", Name: "waves"}}
	names := []string{"rb-1", "rb-2", "rb-3"}
	for _, n := range names {
		cp.CreateNode(t, n, map[string]string{"zone": "r"})
	}
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: e.key.Namespace, Name: e.key.Name},
		Spec: warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{image}, NodeSelector: iwZone("r"),
			Rollout: &warmv1.Rollout{MaxPulling: num(1)}}}
	if err := cp.Client.Create(t.Context(), iw); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(names, func(x, y string) int {
		return cmp.Compare(warmv1.RolloutPlace(iw.UID, x), warmv1.RolloutPlace(iw.UID, y))
	})
	first := int64(warmv1.RolloutPlace(iw.UID, names[0])) + 1
	second := int64(warmv1.RolloutPlace(iw.UID, names[1])) + 1

	// The first write is not held: it admits the first node.
	e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
		if r := st.Rollout; r == nil || r.AdmittedBelow != first {
			return fmt.Errorf("rollout %+v, want bound %d", st.Rollout, first)
		}
		return nil
	})
	refs := []warmv1.WarmRef{{Namespace: e.key.Namespace, Name: e.key.Name, Generation: 1}}
	e.putReport(names[1], refs, iwImg(image, warmv1.ImageQueued))
	e.putReport(names[2], refs, iwImg(image, warmv1.ImageQueued))
	e.putReport(names[0], refs, iwImg(image, warmv1.ImagePresent))
	reported := time.Now()

	var b warmv1.RolloutBound
	iwEventually(t, "the RolloutBound admitting the second node", func() error {
		if err := cp.Client.Get(context.Background(), e.key, &b); err != nil {
			return err
		}
		if b.Spec.AdmittedBelow != second || b.Spec.Generation != 1 || b.Spec.ImageWarmUID != string(iw.UID) {
			return fmt.Errorf("bound %+v, want admittedBelow %d for generation 1 of %s", b.Spec, second, iw.UID)
		}
		return nil
	})
	t.Logf("bound raised %v after the report", time.Since(reported).Round(time.Millisecond))
	if d := time.Since(reported); d > 5*time.Second {
		t.Errorf("bound raised %v after the report, want within seconds", d)
	}
	if len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != iw.UID {
		t.Errorf("owners %+v, want the ImageWarm", b.OwnerReferences)
	}
	got := e.get()
	if r := got.Status.Rollout; r == nil || r.AdmittedBelow != first {
		t.Errorf("status rollout %+v: the progress write was not held back", r)
	}
	if !warmv1.RolloutAdmits(got, &b, names[1]) || warmv1.RolloutAdmits(got, nil, names[1]) || warmv1.RolloutAdmits(got, &b, names[2]) {
		t.Error("the second node must be admitted by the bound alone, the third by neither")
	}
}
