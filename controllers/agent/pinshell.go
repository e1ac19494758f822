package agent

import (
	"context"
	"fmt"

	"github.com/warmer-dev/warmer/controllers/agent/plan"

	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/truncate"
	"github.com/warmer-dev/warmer/pkg/criclient"
)

// Pinner is what the agent needs of the runtime's pinning (criclient's, on
// containerd): pins are made and undone by image name, and warmer's own are
// marked so that it never undoes anyone else's.
type Pinner interface {
	// Mine lists the image names carrying warmer's mark.
	Mine(ctx context.Context) ([]string, error)
	// Pin pins a name and marks the pin as warmer's, unless someone else
	// pinned it.
	Pin(ctx context.Context, name string) (criclient.PinResult, error)
	// Unpin removes warmer's pin from a name; other pins are left alone.
	Unpin(ctx context.Context, name string) (bool, error)
}

var _ Pinner = &criclient.Pinner{}

// pinView reads the runtime's pins for the planner. A failed read leaves
// the planner without warmer's marks for one pass: it then pins nothing
// twice (the runtime reports those pinned) and unpins nothing.
func (a *NodeAgent) pinView(ctx context.Context) plan.PinView {
	var lister func(context.Context) ([]string, error)
	if a.Pinner != nil {
		lister = a.Pinner.Mine
	}
	set, unable, problem := listSet(ctx, lister, a.PinUnable, "pinner", "warmer's pins")
	return plan.PinView{Mine: set, Unable: unable, Problem: problem}
}

// listSet reads one of warmer's per-image records in the runtime (pins,
// marks) into a set. unable is why the runtime keeps none ("no NAME is
// configured" when list is nil and no reason was given); problem is why
// the list failed, the set then unknown.
func listSet(ctx context.Context, list func(context.Context) ([]string, error), unable, name, what string) (set map[string]bool, whyUnable, problem string) {
	if list == nil {
		if unable == "" {
			unable = "no " + name + " is configured"
		}
		return nil, unable, ""
	}
	items, err := list(ctx)
	if err != nil {
		return nil, unable, truncate.String(fmt.Sprintf("listing %s: %v", what, err), warmv1.MaxNodeConditionMessageLength)
	}
	set = make(map[string]bool, len(items))
	for _, it := range items {
		set[it] = true
	}
	return set, unable, ""
}

// applyPins pins and unpins as the plan says, and returns the first
// failure ("" for none) for the plan's Pinning condition.
func (a *NodeAgent) applyPins(ctx context.Context, pins, unpins []string) string {
	if a.Pinner == nil {
		return ""
	}
	var problem string
	fail := func(op, name string, err error) {
		if problem == "" {
			problem = truncate.String(fmt.Sprintf("%s %s: %v", op, name, err), warmv1.MaxNodeConditionMessageLength)
		}
	}
	logger := log.FromContext(ctx)
	for _, name := range pins {
		res, err := a.Pinner.Pin(ctx, name)
		if err != nil {
			fail("pinning", name, err)
			continue
		}
		logger.V(1).Info("Pin", "image", name, "result", pinResultText[res])
	}
	for _, name := range unpins {
		done, err := a.Pinner.Unpin(ctx, name)
		if err != nil {
			fail("unpinning", name, err)
			continue
		}
		logger.V(1).Info("Unpin", "image", name, "unpinned", done)
	}
	return problem
}

var pinResultText = map[criclient.PinResult]string{
	criclient.Pinned:        "pinned",
	criclient.AlreadyMine:   "already pinned by warmer",
	criclient.PinnedByOther: "pinned by someone else: left alone",
	criclient.NoSuchImage:   "no such image",
}
