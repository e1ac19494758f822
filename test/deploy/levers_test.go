package deploy

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// leversPolicyName is the policy that keeps the cluster-wide ImageWarm
// fields to namespaces an operator marked.
const leversPolicyName = "warmer-imagewarm-cluster-levers"

// leversLabel marks a namespace whose ImageWarms may set them.
const leversLabel = "warmer.dev/cluster-levers"

// TestClusterLevers installs config/default and creates ImageWarms, as a
// namespace's user would, in a namespace the operator marked and in one it
// did not: startupTaint, retention Pinned, a selector of control-plane
// nodes, a priority above 0 and a pullTimeout above the operator's
// maximum are refused in the second, with a message that names the label,
// and allowed in the first; an ImageWarm without them is allowed anywhere;
// an update that sets one anew (or raises priority or pullTimeout) is
// refused, one that keeps it is not. The maximum follows the operator's
// ConfigMap, and one that is no duration is refused in words.
func TestClusterLevers(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	install(t, cp)
	ctx := context.Background()
	const plain, marked = "team-plain", "team-marked"
	for ns, labels := range map[string]map[string]string{plain: nil, marked: {leversLabel: "allowed"}} {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	waitForLeversPolicy(t, cp, plain)

	tainted := func(w *warmv1.ImageWarm) { w.Spec.StartupTaint = true }
	pinned := func(w *warmv1.ImageWarm) { w.Spec.Retention = warmv1.RetentionPinned }
	controlPlane := build.MatchLabel("node-role.kubernetes.io/control-plane", "")
	controlPlaneExpr := func(w *warmv1.ImageWarm) {
		w.Spec.NodeSelector = &warmv1.NodeSelector{MatchExpressions: []warmv1.NodeSelectorRequirement{
			{Key: "node-role.kubernetes.io/master", Operator: metav1.LabelSelectorOpExists}}}
	}
	priority := func(p int32) build.ImageWarmOption { return func(w *warmv1.ImageWarm) { w.Spec.Priority = p } }
	timeout := func(d time.Duration) build.ImageWarmOption {
		return func(w *warmv1.ImageWarm) { w.Spec.PullTimeout = &metav1.Duration{Duration: d} }
	}
	create := func(ns, name string, opts ...build.ImageWarmOption) func(context.Context, client.WithWatch) error {
		return func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, build.ImageWarm(ns, name, append([]build.ImageWarmOption{build.Images("nginx:1.27")}, opts...)...))
		}
	}
	admin := clientAs(t, cp, rest.ImpersonationConfig{}) // a namespace's user with every right: only the policy refuses
	runChecks(t, admin, []check{
		{name: "startupTaint, unmarked", want: deniedByPolicy, do: create(plain, "taint", tainted), msg: "namespace " + plain + " is not: leave startupTaint unset, or ask a cluster operator to run kubectl label namespace " + plain + " warmer.dev/cluster-levers=allowed"},
		{name: "Pinned, unmarked", want: deniedByPolicy, do: create(plain, "pinned", pinned), msg: "namespace " + plain + " is not: use retention Unpinned, or ask a cluster operator to run kubectl label namespace " + plain + " warmer.dev/cluster-levers=allowed"},
		{name: "control-plane label, unmarked", want: deniedByPolicy, do: create(plain, "cp-label", controlPlane), msg: "namespace " + plain + " is not: select other nodes, or ask a cluster operator to run kubectl label namespace " + plain + " warmer.dev/cluster-levers=allowed"},
		{name: "control-plane expression, unmarked", want: deniedByPolicy, do: create(plain, "cp-expr", controlPlaneExpr), msg: "control-plane"},
		{name: "priority 1, unmarked", want: deniedByPolicy, do: create(plain, "prio", priority(1)), msg: "spec.priority: 1 puts its pulls ahead of every other namespace's on each node it selects, so only namespaces labelled warmer.dev/cluster-levers=allowed may set priority above 0, and namespace " + plain + " is not: leave priority at 0 or below, or ask a cluster operator to run kubectl label namespace " + plain + " warmer.dev/cluster-levers=allowed"},
		{name: "priority -5, unmarked", want: allowed, do: create(plain, "low", priority(-5))},
		{name: "pullTimeout 31m, unmarked", want: deniedByPolicy, do: create(plain, "slow", timeout(31*time.Minute)), msg: "spec.pullTimeout: 31m0s is longer than 30m, the longest a namespace not labelled warmer.dev/cluster-levers=allowed may set"},
		{name: "pullTimeout 30m, unmarked", want: allowed, do: create(plain, "timeout", timeout(30*time.Minute))},
		{name: "none of them, unmarked", want: allowed, do: create(plain, "plain")},
		{name: "startupTaint, marked", want: allowed, do: create(marked, "taint", tainted)},
		{name: "Pinned, marked", want: allowed, do: create(marked, "pinned", pinned)},
		{name: "control-plane, marked", want: allowed, do: create(marked, "cp", controlPlane)},
		{name: "priority 1000, marked", want: allowed, do: create(marked, "prio", priority(1000))},
		{name: "pullTimeout 24h, marked", want: allowed, do: create(marked, "slow", timeout(24*time.Hour))},
		{name: "an update that sets Pinned, unmarked", want: deniedByPolicy, do: updateWarm(types.NamespacedName{Namespace: plain, Name: "plain"}, pinned)},
		{name: "an update that sets priority 1, unmarked", want: deniedByPolicy, do: updateWarm(types.NamespacedName{Namespace: plain, Name: "plain"}, priority(1)), msg: "spec.priority: 1"},
		{name: "an update that raises pullTimeout past 30m, unmarked", want: deniedByPolicy, do: updateWarm(types.NamespacedName{Namespace: plain, Name: "timeout"}, timeout(time.Hour)), msg: "spec.pullTimeout: 1h0m0s is longer than 30m"},
	})

	// The operator raises the maximum; then writes one that is no
	// duration, which leaves no pullTimeout to unmarked namespaces.
	setAdmission(t, cp, "maxPullTimeout", "2h")
	testbed.Eventually(t, 30*time.Second, "maxPullTimeout 2h in force", func() error {
		return cp.Client.Create(ctx, build.ImageWarm(plain, "probe", build.Images("nginx:1.27"), timeout(time.Hour)), client.DryRunAll)
	})
	setAdmission(t, cp, "maxPullTimeout", "two hours")
	testbed.Eventually(t, 30*time.Second, "maxPullTimeout 'two hours' in force", func() error {
		err := cp.Client.Create(ctx, build.ImageWarm(plain, "probe", build.Images("nginx:1.27"), timeout(time.Hour)), client.DryRunAll)
		if got, _ := verdict(err); got != deniedByPolicy {
			return fmt.Errorf("pullTimeout 1h got %w, want a refusal", err)
		}
		return nil
	})
	runChecks(t, admin, []check{
		{name: "pullTimeout 3h, maximum not a duration, unmarked", want: deniedByPolicy, do: create(plain, "slower", timeout(3*time.Hour)),
			msg: "spec.pullTimeout: key maxPullTimeout of ConfigMap warmer-admission in namespace warmer-system is 'two hours', not a duration such as 30m"},
		{name: "no pullTimeout, maximum broken, unmarked", want: allowed, do: create(plain, "untimed")},
	})
	setAdmission(t, cp, "maxPullTimeout", "30m")

	// A lever set while the namespace was marked stays when the mark
	// goes: the ImageWarm can still be changed and deleted.
	var ns corev1.Namespace
	if err := cp.Client.Get(ctx, types.NamespacedName{Name: marked}, &ns); err != nil {
		t.Fatal(err)
	}
	delete(ns.Labels, leversLabel)
	if err := cp.Client.Update(ctx, &ns); err != nil {
		t.Fatal(err)
	}
	runChecks(t, admin, []check{
		{name: "an update that keeps startupTaint, mark removed", want: allowed, do: updateWarm(types.NamespacedName{Namespace: marked, Name: "taint"}, func(w *warmv1.ImageWarm) {
			w.Spec.Images = append(w.Spec.Images, "redis:7")
		})},
		{name: "an update that lowers priority, mark removed", want: allowed, do: updateWarm(types.NamespacedName{Namespace: marked, Name: "prio"}, priority(500))},
		{name: "an update that raises priority, mark removed", want: deniedByPolicy, do: updateWarm(types.NamespacedName{Namespace: marked, Name: "prio"}, priority(501)), msg: "spec.priority: 501"},
		{name: "an update that keeps pullTimeout 24h, mark removed", want: allowed, do: updateWarm(types.NamespacedName{Namespace: marked, Name: "slow"}, priority(-1))},
		{name: "delete it, mark removed", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Delete(ctx, &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: marked, Name: "taint"}})
		}},
	})
}

// updateWarm reads an ImageWarm as the caller, changes it and updates it.
func updateWarm(key types.NamespacedName, change func(*warmv1.ImageWarm)) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		var w warmv1.ImageWarm
		if err := c.Get(ctx, key, &w); err != nil {
			return err
		}
		change(&w)
		return c.Update(ctx, &w)
	}
}

// waitForLeversPolicy waits until the API server enforces the policy: a
// dry-run create of an ImageWarm with startupTaint in ns is refused.
func waitForLeversPolicy(t *testing.T, cp *testbed.ControlPlane, ns string) {
	t.Helper()
	probe := build.ImageWarm(ns, "policy-probe", build.Images("nginx:1.27"), func(w *warmv1.ImageWarm) { w.Spec.StartupTaint = true })
	testbed.Eventually(t, 30*time.Second, "the levers policy in force", func() error {
		err := cp.Client.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
		if got, _ := verdict(err); got != deniedByPolicy {
			return err
		}
		return nil
	})
}
