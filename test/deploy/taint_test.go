package deploy

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// startupTaint is the agent's default --startup-taint, as config/ spells it.
const startupTaint = "warmer.dev/warming"

// otherTaint is a taint someone else put on the nodes.
var otherTaint = corev1.Taint{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}

// TestAgentNodeTaint makes, as the agent on node-a, the Node patch the
// agent makes to remove its startup taint, and the patches it must not
// make: RBAC lets it patch any Node and its status; the admission policies
// let it remove only that taint, only from node-a, and change nothing else
// but the warm labels there (test/nodesignal has those, and the status).
func TestAgentNodeTaint(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	install(t, cp)
	createFixture(t, cp)
	for _, n := range []string{ownNode, otherNode} {
		setTaints(t, cp.Client, n, otherTaint, corev1.Taint{Key: startupTaint, Effect: corev1.TaintEffectNoSchedule})
	}
	agent := clientAs(t, cp, agentImpersonation(ownNode))
	waitForTaintPolicy(t, agent)

	runChecks(t, agent, []check{
		{name: "remove the startup taint from another Node", want: deniedByPolicy, do: untaint(otherNode, nil),
			msg: "the agent on node node-a may change only Node node-a, not node-b"},
		{name: "remove another taint from its Node", want: deniedByPolicy, do: patchTaints(ownNode, func(ts []corev1.Taint) []corev1.Taint {
			return slices.DeleteFunc(ts, func(t corev1.Taint) bool { return t.Key == otherTaint.Key })
		}), msg: "may only remove taint warmer.dev/warming"},
		{name: "add a taint to its Node", want: deniedByPolicy, do: patchTaints(ownNode, func(ts []corev1.Taint) []corev1.Taint {
			return append(ts, corev1.Taint{Key: "example.com/mine", Effect: corev1.TaintEffectNoExecute})
		}), msg: "may only remove taint warmer.dev/warming"},
		{name: "remove the startup taint and cordon its Node", want: deniedByPolicy,
			do: untaint(ownNode, map[string]any{"op": "add", "path": "/spec/unschedulable", "value": true}), msg: "nothing of its Node but the startup taint"},
		{name: "remove the startup taint and label its Node", want: deniedByPolicy,
			do: untaint(ownNode, map[string]any{"op": "add", "path": "/metadata/labels/example.com~1pwned", "value": "yes"}), msg: "change no other label"},
		{name: "remove the startup taint and annotate its Node", want: deniedByPolicy,
			do: untaint(ownNode, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"x": "y"}}), msg: "nothing of its Node but the startup taint"},
		{name: "patch its Node's status beyond ImagesWarm", want: deniedByPolicy, do: func(ctx context.Context, c client.WithWatch) error {
			n := &corev1.Node{}
			n.Name = ownNode
			return c.Status().Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Running"}}`)))
		}, msg: "nothing of its Node's status but condition ImagesWarm"},
		{name: "delete its Node", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			n := &corev1.Node{}
			n.Name = ownNode
			return c.Delete(ctx, n)
		}},
		{name: "remove the startup taint from its Node", want: allowed, do: untaint(ownNode, nil)},
		// A patch that changes nothing is harmless: the policy lets it by.
		{name: "remove it again, when it is gone", want: allowed, do: untaint(ownNode, nil)},
	})
	var n corev1.Node
	if err := cp.Client.Get(context.Background(), types.NamespacedName{Name: ownNode}, &n); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{otherTaint}) || n.Spec.Unschedulable {
		t.Errorf("node %s has taints %v (unschedulable %v), want only %v", ownNode, n.Spec.Taints, n.Spec.Unschedulable, otherTaint)
	}

	t.Run("without a node name", func(t *testing.T) {
		runChecks(t, clientAs(t, cp, agentImpersonation("")), []check{
			{name: "remove the startup taint", want: deniedByPolicy, do: untaint(otherNode, nil), msg: "carries no node name"},
		})
	})
}

// setTaints sets a Node's taints as the admin.
func setTaints(t *testing.T, admin client.Client, node string, taints ...corev1.Taint) {
	t.Helper()
	var n corev1.Node
	ctx := context.Background()
	if err := admin.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = taints
	if err := admin.Update(ctx, &n); err != nil {
		t.Fatalf("tainting node %s: %v", node, err)
	}
}

// untaint removes the startup taint from a Node as the agent does (a JSON
// patch that tests the taints, then replaces them), with extra operations
// after it.
func untaint(node string, extra ...map[string]any) func(context.Context, client.WithWatch) error {
	return patchTaints(node, func(ts []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(ts, func(t corev1.Taint) bool { return t.Key == startupTaint })
	}, extra...)
}

// patchTaints reads a Node as the caller and patches its taints to what
// change makes of them, with extra operations after.
func patchTaints(node string, change func([]corev1.Taint) []corev1.Taint, extra ...map[string]any) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		var n corev1.Node
		if err := c.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
			return err
		}
		ops := []map[string]any{
			{"op": "test", "path": "/spec/taints", "value": n.Spec.Taints},
			{"op": "replace", "path": "/spec/taints", "value": change(slices.Clone(n.Spec.Taints))},
		}
		for _, op := range extra {
			if op != nil {
				ops = append(ops, op)
			}
		}
		data, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		return c.Patch(ctx, &n, client.RawPatch(types.JSONPatchType, data))
	}
}

// waitForTaintPolicy waits until the Node policy is enforced (see
// waitForPolicy): a dry-run removal from another Node is refused by it.
func waitForTaintPolicy(t *testing.T, agent client.WithWatch) {
	t.Helper()
	probe := untaint(otherNode)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := probe(context.Background(), &dryRun{agent})
		if got, _ := verdict(err); got == deniedByPolicy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("policy %s not in force within 30s: removing node-b's taint gets %v", taintPolicyName, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dryRun makes every patch a dry run.
type dryRun struct{ client.WithWatch }

func (d *dryRun) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return d.WithWatch.Patch(ctx, obj, p, append(opts, client.DryRunAll)...)
}
