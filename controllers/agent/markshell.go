package agent

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/pkg/criclient"
)

// Marker is what the agent needs of the runtime's record of images it
// pulled with pull secrets (criclient's, on containerd; plan/marks.go
// says why).
type Marker interface {
	// Marked lists the digests of the marked images.
	Marked(ctx context.Context) ([]string, error)
	// Mark marks an image name; false when the runtime has no such image.
	Mark(ctx context.Context, name string) (bool, error)
}

var _ Marker = &criclient.Marker{}

// markView reads the runtime's marks for the planner.
func (a *NodeAgent) markView(ctx context.Context) plan.MarkView {
	var lister func(context.Context) ([]string, error)
	if a.Marker != nil {
		lister = a.Marker.Marked
	}
	set, unable, problem := listSet(ctx, lister, a.MarkUnable, "marker", "warmer's marks")
	if problem != "" {
		log.FromContext(ctx).Info("Reading the marks of images pulled with pull secrets failed; none counts as preloaded this pass", "reason", problem)
	}
	return plan.MarkView{Digests: set, Unable: unable, Problem: problem}
}

// applyMarks marks the names the plan asks for. A failure is logged and
// tried again next pass: the proof the mark stands for is still in
// memory.
func (a *NodeAgent) applyMarks(ctx context.Context, names []string) {
	if a.Marker == nil {
		return
	}
	logger := log.FromContext(ctx)
	for _, name := range names {
		done, err := a.Marker.Mark(ctx, name)
		if err != nil {
			logger.Info("Marking an image pulled with pull secrets failed", "image", name, "reason", err.Error())
			continue
		}
		logger.V(1).Info("Mark", "image", name, "marked", done)
	}
}
