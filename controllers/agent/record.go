package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/internal/truncate"
)

// record sends events. Subjects and the related Node are references
// without a resourceVersion: the recorder keys its series on them, and the
// ImageWarm's and Node's versions change with every status write, so with
// them no repeat would ever fold into a series.
func (a *NodeAgent) record(ctx context.Context, node *corev1.Node, events []plan.Event) {
	if a.Recorder == nil || len(events) == 0 {
		return
	}
	related := nodeStub(node)
	suffix := " (node " + a.NodeName + ")"
	for _, e := range events {
		msg := truncate.String(e.Note, plan.MaxEventNote-len(suffix)) + suffix
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		for _, iw := range e.Subjects {
			a.Recorder.Eventf(iw, related, typ, e.Reason, e.Action, "%s", msg)
		}
		if e.OnNode {
			a.Recorder.Eventf(related, nil, typ, e.Reason, e.Action, "%s", msg)
		}
		log.FromContext(ctx).V(1).Info("Event", "reason", e.Reason, "message", msg)
	}
}

// nodeStub is the same for the Node.
func nodeStub(node *corev1.Node) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID},
	}
}
