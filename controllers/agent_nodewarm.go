package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// ConditionRuntimeReady is the NodeWarm condition that says whether the
// container runtime answers.
const ConditionRuntimeReady = "RuntimeReady"

// ensureNodeWarm returns the node's NodeWarm, creating it (owned by the
// Node, so it goes with it) when missing. It is read once; later passes
// use the copy this agent keeps, since only this agent writes it.
func (a *NodeAgent) ensureNodeWarm(ctx context.Context, node *corev1.Node) (*warmv1.NodeWarm, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if nw := a.st.nodeWarm; nw != nil {
		return nw, nil
	}
	nw := &warmv1.NodeWarm{}
	err := a.APIReader.Get(ctx, types.NamespacedName{Name: a.NodeName}, nw)
	if apierrors.IsNotFound(err) {
		nw = &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{
			Name: a.NodeName,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		}}
		err = a.Client.Create(ctx, nw)
	}
	if err != nil {
		return nil, fmt.Errorf("getting or creating NodeWarm %q: %w", a.NodeName, err)
	}
	a.st.nodeWarm = nw
	// What an earlier run of the agent reported counts as reported: an
	// agent restart with nothing changed writes nothing.
	reported := nw.Status.DeepCopy()
	a.st.reported = reported
	return nw, nil
}

// maybeWrite writes status when it differs from what was last written. A
// settled status (no pull under way) is written at once; progress is
// written at most every ProgressInterval after the last write ended, so a
// burst of finished pulls coalesces into one write, and a slow API server
// gets fewer writes, not a backlog. Every write also takes a token from
// StatusLimiter. It returns how long to wait before trying a deferred
// write again.
//
// The write itself runs without a.mu: the engine's listener takes it on
// every pull start and end, and a write stuck in the API server's queue
// must not hold up pulls. Only the reconcile goroutine writes.
func (a *NodeAgent) maybeWrite(ctx context.Context, nw *warmv1.NodeWarm, status warmv1.NodeWarmStatus) (time.Duration, error) {
	a.mu.Lock()
	wait, due := a.writeDueLocked(status, time.Now())
	a.mu.Unlock()
	if !due {
		return wait, nil
	}
	return 0, a.write(ctx, nw, status)
}

// writeDueLocked says whether status is to be written now, or else how
// long to wait (0: nothing to write).
func (a *NodeAgent) writeDueLocked(status warmv1.NodeWarmStatus, now time.Time) (time.Duration, bool) {
	if a.st.reported != nil && sameReport(*a.st.reported, status) {
		return 0, false
	}
	settled := status.Pulling == 0
	if since := now.Sub(a.st.lastWrite); !settled && since < a.ProgressInterval {
		nodeWarmWrites.WithLabelValues("deferred").Inc()
		return a.ProgressInterval - since, false
	}
	if a.StatusLimiter != nil && !a.StatusLimiter.TryAccept() {
		nodeWarmWrites.WithLabelValues("throttled").Inc()
		return time.Duration(float64(time.Second) / float64(a.StatusLimiter.QPS())), false
	}
	return 0, true
}

func (a *NodeAgent) write(ctx context.Context, nw *warmv1.NodeWarm, status warmv1.NodeWarmStatus) error {
	nw.Status = status
	err := a.Client.Status().Update(ctx, nw)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		nodeWarmWrites.WithLabelValues("error").Inc()
		// Conflict (someone else wrote it) or NotFound (deleted): read it
		// again on the next pass.
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			a.st.nodeWarm = nil
		}
		return fmt.Errorf("writing NodeWarm %q status: %w", a.NodeName, err)
	}
	nodeWarmWrites.WithLabelValues("ok").Inc()
	a.st.reported, a.st.lastWrite = status.DeepCopy(), time.Now()
	log.FromContext(ctx).V(1).Info("Wrote NodeWarm status", "desired", status.Desired, "present", status.Present,
		"pulling", status.Pulling, "failed", status.Failed)
	return nil
}

// sameReport compares two statuses, ignoring image filesystem byte counts
// unless the fill level moved: they drift with every pull anybody makes,
// and would otherwise cause writes that tell nobody anything.
func sameReport(a, b warmv1.NodeWarmStatus) bool {
	a.ImageFilesystem, b.ImageFilesystem = fsLevel(a.ImageFilesystem), fsLevel(b.ImageFilesystem)
	return equality.Semantic.DeepEqual(a, b)
}

func fsLevel(fs *warmv1.ImageFilesystem) *warmv1.ImageFilesystem {
	if fs == nil {
		return nil
	}
	return &warmv1.ImageFilesystem{Mountpoint: fs.Mountpoint, UsedPercent: fs.UsedPercent}
}

// reportRuntimeDown marks the runtime as not answering, keeping the rest
// of the last report.
func (a *NodeAgent) reportRuntimeDown(ctx context.Context, nw *warmv1.NodeWarm, cause error) error {
	a.mu.Lock()
	status := nw.Status.DeepCopy()
	if a.st.reported != nil {
		status = a.st.reported.DeepCopy()
	}
	a.mu.Unlock()
	status.Conditions = runtimeCondition(status.Conditions, metav1.ConditionFalse, "RuntimeNotAnswering", cut(cause.Error()))
	_, err := a.maybeWrite(ctx, nw, *status)
	return err
}

// runtimeCondition returns conds with RuntimeReady set.
func runtimeCondition(conds []metav1.Condition, status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	meta.SetStatusCondition(&out, metav1.Condition{Type: ConditionRuntimeReady, Status: status, Reason: reason, Message: msg})
	return out
}
