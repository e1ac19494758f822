package agent

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestQuietQueue checks that the agent's queue hands out what it is given
// and registers no workqueue metrics, whose upkeep wakes the process twice
// a second.
func TestQuietQueue(t *testing.T) {
	const name = "agent-quiet-test"
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, time.Second)
	q := quietQueue(logr.Discard())(name, rl)
	defer q.ShutDown()
	want := reconcile.Request{NamespacedName: types.NamespacedName{Name: "node-a"}}
	q.Add(want)
	q.AddRateLimited(want)
	got, shutdown := q.Get()
	if shutdown || got != want {
		t.Fatalf("Get = %v, %v; want %v", got, shutdown, want)
	}
	q.Done(got)
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == name {
					t.Errorf("the queue exports %s%v", f.GetName(), m.GetLabel())
				}
			}
		}
	}
}
