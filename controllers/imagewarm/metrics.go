package imagewarm

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Outcomes of one ImageWarm status reconcile, the result label of
// imageWarmStatusWrites.
const (
	statusWritten   = "written"
	statusUnchanged = "unchanged"
	statusDeferred  = "deferred"
	statusConflict  = "conflict"
	statusError     = "error"
)

// The status controller's metrics. Only imageWarmNodes is labelled per
// ImageWarm: the controller runs once per cluster and ImageWarms are few, so
// its series are bounded by them (and deleted with them); nothing is labelled
// by node or image. The labels are imagewarm_namespace and imagewarm, not
// namespace and name, because scrape configurations (and the Prometheus
// Operator) put the Pod's own namespace into a target label called
// namespace, which would rename ours to exported_namespace.
var (
	imageWarmStatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warmer_imagewarm_status_writes_total",
		Help: "ImageWarm status reconciles by result: written, unchanged (no write needed), deferred (rate-limited, retried later), conflict or error.",
	}, []string{"result"})

	imageWarmAggregateSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "warmer_imagewarm_aggregate_duration_seconds",
		Help:    "Time to fold every node's report into one ImageWarm's status.",
		Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1},
	})

	rolloutBoundWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "warmer_rollout_bound_writes_total",
		Help: "Writes of RolloutBounds: a rollout's bound raised apart from the ImageWarm's status, so the next wave starts at once.",
	})

	imageWarmNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warmer_imagewarm_nodes",
		Help: "Nodes an ImageWarm selects, by state: matching, ready, pulling, failed, not_reporting.",
	}, []string{"imagewarm_namespace", "imagewarm", "state"})
)

func init() {
	metrics.Registry.MustRegister(imageWarmStatusWrites, imageWarmAggregateSeconds, rolloutBoundWrites, imageWarmNodes)
}

// recordImageWarmNodes publishes an ImageWarm's node counts.
func recordImageWarmNodes(namespace, name string, n warmv1.NodeCounts) {
	for _, c := range [...]struct {
		state string
		v     int32
	}{
		{"matching", n.Matching},
		{"ready", n.Ready},
		{"pulling", n.Pulling},
		{"failed", n.Failed},
		{"not_reporting", n.NotReporting},
	} {
		imageWarmNodes.WithLabelValues(namespace, name, c.state).Set(float64(c.v))
	}
}

// forgetImageWarmNodes drops a deleted ImageWarm's series.
func forgetImageWarmNodes(namespace, name string) {
	imageWarmNodes.DeletePartialMatch(prometheus.Labels{"imagewarm_namespace": namespace, "imagewarm": name})
}
