package agent

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/internal/truncate"
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
	v := plan.MarkView{Unable: a.MarkUnable}
	if a.Marker == nil {
		if v.Unable == "" {
			v.Unable = "no marker is configured"
		}
		return v
	}
	digests, err := a.Marker.Marked(ctx)
	if err != nil {
		v.Problem = truncate.String(fmt.Sprintf("listing warmer's marks: %v", err), warmv1.MaxNodeConditionMessageLength)
		log.FromContext(ctx).Info("Reading the marks of images pulled with pull secrets failed; none counts as preloaded this pass", "reason", v.Problem)
		return v
	}
	v.Digests = make(map[string]bool, len(digests))
	for _, d := range digests {
		v.Digests[d] = true
	}
	return v
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
