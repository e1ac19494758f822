package perf

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// warmWatch watches the node's NodeWarm and one ImageWarm, so that a warm
// is timed by when the API server delivers each, as `kubectl get -w` and
// `kubectl wait` would see them.
type warmWatch struct{ nw, iw watch.Interface }

// watchWarm starts the watches, before iw is created; they stop with ctx.
func (wb *warmBed) watchWarm(ctx context.Context, b *testing.B, iw *warmv1.ImageWarm) *warmWatch {
	b.Helper()
	nw, err := wb.cli.Watch(ctx, &warmv1.NodeWarmList{}, client.MatchingFields{"metadata.name": wb.node})
	if err != nil {
		b.Fatal(err)
	}
	iww, err := wb.cli.Watch(ctx, &warmv1.ImageWarmList{}, client.InNamespace(iw.Namespace),
		client.MatchingFields{"metadata.name": iw.Name})
	if err != nil {
		nw.Stop()
		b.Fatal(err)
	}
	go func() {
		<-ctx.Done()
		nw.Stop()
		iww.Stop()
	}()
	return &warmWatch{nw: nw, iw: iww}
}

// wait reads both watches until the NodeWarm lists n images, all present,
// and the ImageWarm is Ready on its one node, and returns when each came.
func (w *warmWatch) wait(n int) (present, ready time.Time, err error) {
	timeout := time.After(5 * time.Minute)
	for present.IsZero() || ready.IsZero() {
		select {
		case ev, ok := <-w.nw.ResultChan():
			if !ok {
				return present, ready, errors.New("NodeWarm watch closed")
			}
			nw, isNW := ev.Object.(*warmv1.NodeWarm)
			if isNW && present.IsZero() && int(nw.Status.Desired) == n && int(nw.Status.Present) == n {
				present = time.Now()
			}
		case ev, ok := <-w.iw.ResultChan():
			if !ok {
				return present, ready, errors.New("ImageWarm watch closed")
			}
			iw, isIW := ev.Object.(*warmv1.ImageWarm)
			if isIW && ready.IsZero() && warmReady(iw) {
				ready = time.Now()
			}
		case <-timeout:
			return present, ready, fmt.Errorf("after 5 minutes: NodeWarm all present at %v, ImageWarm Ready at %v (zero: not yet)", present, ready)
		}
	}
	return present, ready, nil
}

// warmReady says whether iw's status says Ready on its current spec.
func warmReady(iw *warmv1.ImageWarm) bool {
	c := meta.FindStatusCondition(iw.Status.Conditions, warmv1.ConditionReady)
	return c != nil && c.Status == "True" && c.ObservedGeneration == iw.Generation && iw.Status.Nodes.Ready == 1
}
