package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent/plan"
)

// The node's own signals' shell (plan/nodesignal.go decides them): the
// warm labels, by a merge patch of metadata.labels, and the ImagesWarm
// condition, by a strategic merge patch of status.conditions, which merges
// by type and so leaves the kubelet's conditions alone. Each is written
// only when the Node, as last read, says otherwise, so a settled node
// costs no write; the admission policies in config/policy hold each write
// to the agent's own Node, to labels under the warm domain and to that one
// condition.

// signalWrites remembers the agent's writes of its Node's signals. The
// agent reads its Node from its cache, which shows the agent's own write
// a moment later; a pass in that moment (a pull ending) would find the
// Node as it was and write the same signal again (seen in test/perf
// BenchmarkNodeSignals). So a signal's write is skipped when it is the
// same as that signal's last write and the Node was read at a
// resourceVersion from before the agent's last write of it: the write is
// on its way to the cache. Once the cache shows a later version, it holds
// every write of the agent's.
type signalWrites struct {
	// stale are the Node's resourceVersions from before the last write
	// (the last few); last is the one that write made.
	stale []string
	last  string
	// labels and condition are what each signal's last write set.
	labels, condition string
}

// staleKept bounds stale: a cache more writes behind than this is not
// seen, and costs one write again.
const staleKept = 16

// again says whether writing what (the signal's last write being wrote)
// to a Node read at resourceVersion rv repeats a write the cache has not
// shown yet.
func (w *signalWrites) again(rv, wrote, what string) bool {
	return wrote == what && slices.Contains(w.stale, rv)
}

// wrote records a write to the Node read at resourceVersion read that
// made resourceVersion after.
func (w *signalWrites) wrote(read, after string) {
	w.stale = append(w.stale, read)
	if w.last != "" {
		w.stale = append(w.stale, w.last)
	}
	if len(w.stale) > staleKept {
		w.stale = w.stale[len(w.stale)-staleKept:]
	}
	w.last = after
}

// applyNodeSignals writes the plan's warm labels and ImagesWarm condition
// where the Node differs; a no-op unless NodeSignals is set.
func (a *NodeAgent) applyNodeSignals(ctx context.Context, node *corev1.Node, out *plan.Output) error {
	if !a.NodeSignals {
		return nil
	}
	return errors.Join(a.applyNodeLabels(ctx, node, out.NodeLabels), a.applyImagesWarm(ctx, node, out.ImagesWarm))
}

// labelsPatch is the merge patch that makes the Node's warm labels want,
// and nothing else: nil values delete; nil when nothing changes.
func labelsPatch(have map[string]string, want []string) map[string]any {
	set := map[string]any{}
	for _, key := range want {
		if have[key] != warmv1.NodeLabelValue {
			set[key] = warmv1.NodeLabelValue
		}
	}
	for key := range have {
		if warmv1.IsNodeLabelKey(key) && !slices.Contains(want, key) {
			set[key] = nil
		}
	}
	if len(set) == 0 {
		return nil
	}
	return set
}

// applyNodeLabels adds the warm labels the node should carry and removes
// the other labels under the warm domain, those of ImageWarms deleted, no
// longer selecting the node, turned off or not warm.
func (a *NodeAgent) applyNodeLabels(ctx context.Context, node *corev1.Node, want []string) error {
	set := labelsPatch(node.Labels, want)
	if set == nil {
		return nil
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": set}})
	if err != nil {
		return fmt.Errorf("encoding the label patch: %w", err)
	}
	if a.signals.again(node.ResourceVersion, a.signals.labels, string(data)) {
		return nil
	}
	patched := node.DeepCopy()
	if err := a.Client.Patch(ctx, patched, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("writing warm labels of node %s: %w", node.Name, err)
	}
	a.signals.wrote(node.ResourceVersion, patched.ResourceVersion)
	a.signals.labels = string(data)
	log.FromContext(ctx).Info("Wrote warm labels", "labels", slices.Sorted(maps.Keys(set)))
	return nil
}

// applyImagesWarm writes the ImagesWarm condition when its status, reason
// or message changed: the heartbeat moves with a change only, not with
// every pass, and the transition time with a new status only.
func (a *NodeAgent) applyImagesWarm(ctx context.Context, node *corev1.Node, s plan.NodeSignal) error {
	now := metav1.NewTime(a.Clock.Now())
	c := corev1.NodeCondition{Type: warmv1.ConditionImagesWarm, Status: s.Status, Reason: s.Reason, Message: s.Message,
		LastHeartbeatTime: now, LastTransitionTime: now}
	for _, old := range node.Status.Conditions {
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return nil
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	what := string(c.Status) + "/" + c.Reason + "/" + c.Message
	if a.signals.again(node.ResourceVersion, a.signals.condition, what) {
		return nil
	}
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		return fmt.Errorf("encoding the condition patch: %w", err)
	}
	patched := node.DeepCopy()
	if err := a.Client.Status().Patch(ctx, patched, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("writing condition %s of node %s: %w", c.Type, node.Name, err)
	}
	a.signals.wrote(node.ResourceVersion, patched.ResourceVersion)
	a.signals.condition = what
	log.FromContext(ctx).Info("Wrote node condition", "condition", c.Type, "status", c.Status, "reason", c.Reason)
	return nil
}
