package agent

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/warmer-dev/warmer/controllers/agent/plan"
)

// lastReportTimeout bounds the last report's write: well inside the
// kubelet's grace period (30 s by default) for the agent's Pod.
const lastReportTimeout = 5 * time.Second

// lastReport writes the agent's report one last time when the manager
// stops (SIGTERM: its Pod deleted, a DaemonSet roll, a drain). The pacing
// holds a report back for seconds while pulls run, so the images that
// arrived last are often not in the NodeWarm yet; the next agent on the
// node seeds from the NodeWarm and, finding no proof that an entry's
// credentials brought those images, would ask the registry about each
// again (a manifest request, which some registries count as a pull).
type lastReport struct{ a *NodeAgent }

// Start waits for the manager to stop, then makes the last pass.
func (r lastReport) Start(ctx context.Context) error {
	<-ctx.Done()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastReportTimeout)
	defer cancel()
	if err := r.a.lastPass(wctx); err != nil {
		log.FromContext(ctx).Info("The last report before stopping was not written", "error", err.Error())
	}
	return nil
}

// NeedLeaderElection is false: every agent reports on its own node.
func (lastReport) NeedLeaderElection() bool { return false }

// lastPass is a pass that only reports: it folds what the engine told since
// the last pass and writes the status if it differs from the one written,
// whatever the pacing; it starts, stops, pins and records nothing. It
// waits for a pass under way to end.
func (a *NodeAgent) lastPass(ctx context.Context) error {
	a.passMu.Lock()
	defer a.passMu.Unlock()
	node, err := a.node(ctx)
	if err != nil {
		return err
	}
	nw, desired, err := a.read(ctx, node)
	if err != nil {
		return err
	}
	in, err := a.gather(ctx, nw, desired)
	if err != nil {
		return err
	}
	in.Taint = a.taintInput(node)
	out := plan.Decide(in)
	if last := a.carry.report.pace.Last(); last != nil && equality.Semantic.DeepEqual(*last, out.Status) {
		return nil
	}
	if err := a.write(ctx, nw, out.Status); err != nil {
		return err
	}
	log.FromContext(ctx).Info("Wrote the last report before stopping", "present", out.Status.Present, "pulling", out.Status.Pulling)
	return nil
}
