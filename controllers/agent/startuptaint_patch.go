package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/warmer-dev/warmer/controllers/agent/plan"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The startup taint's shell: what the planner reads of the Node, and the
// patch that removes the taint.

// DefaultStartupTaintKey is the startup taint's key unless the agent's
// --startup-taint says otherwise.
const DefaultStartupTaintKey = "warmer.dev/warming"

// DefaultStartupTaintDeadline is how long after a Node's creation its
// startup taint goes, warm or not, unless --startup-taint-deadline says
// otherwise.
const DefaultStartupTaintDeadline = 10 * time.Minute

// taintInput reads the startup taint's facts off the Node.
func (a *NodeAgent) taintInput(node *corev1.Node) plan.TaintInput {
	if a.StartupTaintKey == "" {
		return plan.TaintInput{}
	}
	return plan.TaintInput{
		Key:      a.StartupTaintKey,
		OnNode:   hasTaint(node, a.StartupTaintKey),
		Deadline: node.CreationTimestamp.Add(a.StartupTaintDeadline),
	}
}

func hasTaint(node *corev1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// applyTaint removes the startup taint when the plan says so. When the API
// server refuses, the planner's TaintNotRemoved amends the plan (no
// removal events, a StartupTaint condition that says the removal failed);
// the error is returned, so the pass is retried.
func (a *NodeAgent) applyTaint(ctx context.Context, node *corev1.Node, out *plan.Output) error {
	if !out.RemoveTaint {
		return nil
	}
	err := a.removeStartupTaint(ctx, node)
	if err == nil {
		log.FromContext(ctx).Info("Removed the startup taint", "taint", a.StartupTaintKey)
		return nil
	}
	out.TaintNotRemoved(a.StartupTaintKey, err, a.Clock.Now())
	return err
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string         `json:"op"`
	Path  string         `json:"path"`
	Value []corev1.Taint `json:"value"`
}

// removeStartupTaint removes every taint with the startup taint's key from
// the Node, and nothing else. The JSON patch tests the taints it was
// computed from before it replaces them: a taint added or removed by
// someone else meanwhile fails the test, and the patch is made again from
// a fresh read, so no concurrent change is lost. A read from the cache may
// also be behind: the fresh read then shows the taint already gone.
func (a *NodeAgent) removeStartupTaint(ctx context.Context, node *corev1.Node) error {
	for attempt := 0; ; attempt++ {
		kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool { return t.Key == a.StartupTaintKey })
		data, err := json.Marshal([]jsonPatchOp{
			{Op: "test", Path: "/spec/taints", Value: node.Spec.Taints},
			{Op: "replace", Path: "/spec/taints", Value: kept},
		})
		if err != nil {
			return fmt.Errorf("encoding the taint patch: %w", err)
		}
		err = a.Client.Patch(ctx, node.DeepCopy(), client.RawPatch(types.JSONPatchType, data))
		switch {
		case err == nil:
			return nil
		case attempt < 2 && (apierrors.IsInvalid(err) || apierrors.IsConflict(err)):
			// The test failed: the taints read are stale.
		default:
			return fmt.Errorf("removing taint %s from node %s: %w", a.StartupTaintKey, node.Name, err)
		}
		fresh := &corev1.Node{}
		if err := a.APIReader.Get(ctx, types.NamespacedName{Name: node.Name}, fresh); err != nil {
			return fmt.Errorf("reading node %s again: %w", node.Name, err)
		}
		if !hasTaint(fresh, a.StartupTaintKey) {
			return nil
		}
		node = fresh
	}
}
