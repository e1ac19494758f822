package agent

import (
	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// quietQueue builds the agent's work queue: controller-runtime's priority
// queue, as its controllers get by default, without the workqueue_*
// metrics. With metrics the queue wakes every 500 ms to update its
// unfinished-work gauges, which was the agent's only frequent wakeup at
// rest (docs/performance.md); the agent's queue holds one key, the node,
// and controller-runtime's controller_runtime_reconcile_* metrics still
// count and time every pass.
func quietQueue(log logr.Logger) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		// An empty name is what turns the queue's metrics off.
		return priorityqueue.New("", func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = rl
		})
	}
}
