package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// The agent's own metrics; the pull engine's are in pkg/pullengine. No
// label carries an image name: the set would be unbounded.
var (
	imagesByState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warmer_node_images",
		Help: "Images wanted on this node, by state (Present, Pulling, Queued, BackOff, Failed, Skipped).",
	}, []string{"state"})
	imagesDesired = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "warmer_node_images_desired",
		Help: "Distinct images the ImageWarms matching this node ask for.",
	})
	evictionsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "warmer_image_evictions_total",
		Help: "Wanted images this agent saw present that then disappeared from the node.",
	})
	diskLevelKnown = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "warmer_image_filesystem_level_known",
		Help: "1 while the disk guard can read the image filesystem's level, 0 while it cannot (see the NodeWarm's DiskPressure condition).",
	})
	nodeWarmWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warmer_nodewarm_writes_total",
		Help: "NodeWarm status writes, by result: ok, error, deferred (coalescing progress) or throttled (token bucket).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(imagesByState, imagesDesired, evictionsTotal, diskLevelKnown, nodeWarmWrites)
}

var allStates = []warmv1.ImageState{warmv1.ImagePresent, warmv1.ImagePulling, warmv1.ImageQueued,
	warmv1.ImageBackOff, warmv1.ImageFailed, warmv1.ImageSkipped}

// setGauges publishes a status's counts.
func setGauges(st warmv1.NodeWarmStatus) {
	n := map[warmv1.ImageState]int{}
	for _, img := range st.Images {
		n[img.State]++
	}
	for _, s := range allStates {
		imagesByState.WithLabelValues(string(s)).Set(float64(n[s]))
	}
	imagesDesired.Set(float64(st.Desired))
	known := 1.0
	if c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionDiskPressure); c != nil && c.Reason == warmv1.ReasonLevelUnknown {
		known = 0
	}
	diskLevelKnown.Set(known)
}
