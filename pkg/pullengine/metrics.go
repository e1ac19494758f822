package pullengine

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/warmer-dev/warmer/internal/promreg"
)

// Label values of warmer_image_pulls_total's result label.
const (
	resultSuccess  = "success"
	resultFailure  = "failure"
	resultCanceled = "canceled"
)

// pullDurationBuckets are the kubelet's image_pull_duration_seconds
// buckets, so that dashboards for both read alike.
var pullDurationBuckets = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// imageSizeBands are the kubelet's image size bands (GetImageSizeBucket),
// by exclusive lower bound: a bounded label set for the duration histogram.
var imageSizeBands = []struct {
	above uint64
	label string
}{
	{100 << 30, "GT100GB"},
	{60 << 30, "60GB-100GB"},
	{40 << 30, "40GB-60GB"},
	{30 << 30, "30GB-40GB"},
	{20 << 30, "20GB-30GB"},
	{10 << 30, "10GB-20GB"},
	{5 << 30, "5GB-10GB"},
	{1 << 30, "1GB-5GB"},
	{500 << 20, "500MB-1GB"},
	{100 << 20, "100MB-500MB"},
	{10 << 20, "10MB-100MB"},
	{0, "0-10MB"},
}

// sizeBand is the band of an image size, "N/A" when the size is unknown.
func sizeBand(size uint64) string {
	for _, b := range imageSizeBands {
		if size > b.above {
			return b.label
		}
	}
	return "N/A"
}

// metrics are an engine's Prometheus metrics. Labels are bounded: no image
// names, digests or node names.
type metrics struct {
	pullDuration  *prometheus.HistogramVec
	pullsTotal    *prometheus.CounterVec
	pullCalls     prometheus.Counter
	pullsInFlight prometheus.Gauge
	pullsQueued   prometheus.Gauge
	pullBackOffs  *prometheus.CounterVec
	pulledBytes   prometheus.Counter
	fetchedBytes  prometheus.Counter
	throughput    prometheus.Gauge
	yielding      prometheus.Gauge
	yields        prometheus.Counter
	pauses        prometheus.Counter
	sharePauses   prometheus.Counter
	sizePauses    prometheus.Counter
}

// newMetrics makes an engine's metrics and registers them on reg, unless
// reg is nil. The engine is a library: the registry is its caller's (the
// agent passes controller-runtime's, which its /metrics serves). Engines
// sharing a registry share its metrics: the second one finds them
// registered and uses the same collectors, so a process may run several.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "warmer_image_pull_duration_seconds",
			Help:    "Duration of successful image pulls, all credential attempts included, by image size band.",
			Buckets: pullDurationBuckets,
		}, []string{"image_size"}),
		pullsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warmer_image_pulls_total",
			Help: "Pull jobs that ended, by result (success, failure, canceled) and reason (empty on success). A job that another tag's pull of the same image satisfied counts as a success without a call to the runtime: warmer_cri_pull_image_calls_total counts the calls.",
		}, []string{"result", "reason"}),
		pullCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warmer_cri_pull_image_calls_total",
			Help: "PullImage calls the agent made to the runtime, one per credential tried: each asks the registry for a manifest at least.",
		}),
		pullsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "warmer_image_pulls_in_flight",
			Help: "Pulls running now.",
		}),
		pullsQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "warmer_image_pulls_queued",
			Help: "Pulls waiting for a free slot.",
		}),
		pullBackOffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warmer_image_pull_backoffs_total",
			Help: "Failed pulls that started or extended an image's back-off, by reason.",
		}, []string{"reason"}),
		pulledBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warmer_image_pulled_bytes_total",
			Help: "Sum of the sizes the runtime reports for successfully pulled images.",
		}),
		fetchedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warmer_image_fetched_bytes_total",
			Help: "Compressed bytes the agent's pulls fetched from registries, as the runtime's content store shows them arrive (containerd only).",
		}),
		throughput: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "warmer_image_pull_throughput_bytes_per_second",
			Help: "Compressed bytes a second the agent's pulls under way fetch together, smoothed over a few seconds (containerd only).",
		}),
		yielding: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "warmer_image_pulls_yielding",
			Help: "1 while the agent yields to pulls the runtime makes for someone else (the kubelet): it starts no pull then.",
		}),
		yields: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warmer_image_pull_yields_total",
			Help: "Times the agent started yielding to pulls the runtime makes for someone else.",
		}),
		pauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warmer_image_pull_pauses_total",
			Help: "Pulls under way the agent paused to yield to pulls the runtime makes for someone else; each is queued again and resumes from the bytes it had fetched.",
		}),
		sharePauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warmer_image_pull_share_pauses_total",
			Help: "Pulls under way the agent paused because their namespace held more than its fair number of pull slots while another namespace's pull waited; each is queued again and resumes from the bytes it had fetched.",
		}),
		sizePauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warmer_image_pull_size_pauses_total",
			Help: "Pulls of large images the agent paused because large images' pulls held every pull slot while a smaller image's pull waited; each is queued again and resumes from the bytes it had fetched.",
		}),
	}
	if reg == nil {
		return m
	}
	m.pullDuration = promreg.Register(reg, m.pullDuration)
	m.pullsTotal = promreg.Register(reg, m.pullsTotal)
	m.pullCalls = promreg.Register(reg, m.pullCalls)
	m.pullsInFlight = promreg.Register(reg, m.pullsInFlight)
	m.pullsQueued = promreg.Register(reg, m.pullsQueued)
	m.pullBackOffs = promreg.Register(reg, m.pullBackOffs)
	m.pulledBytes = promreg.Register(reg, m.pulledBytes)
	m.fetchedBytes = promreg.Register(reg, m.fetchedBytes)
	m.throughput = promreg.Register(reg, m.throughput)
	m.yielding = promreg.Register(reg, m.yielding)
	m.yields = promreg.Register(reg, m.yields)
	m.pauses = promreg.Register(reg, m.pauses)
	m.sharePauses = promreg.Register(reg, m.sharePauses)
	m.sizePauses = promreg.Register(reg, m.sizePauses)
	return m
}

// observe records a finished job.
func (m *metrics) observe(res Result) {
	m.pullCalls.Add(float64(res.Attempts))
	switch {
	case res.Succeeded():
		m.pullsTotal.WithLabelValues(resultSuccess, "").Inc()
		if res.Attempts > 0 { // not brought by a sibling's pull (repo.go)
			m.pullDuration.WithLabelValues(sizeBand(res.Size)).Observe(res.Duration.Seconds())
			m.pulledBytes.Add(float64(res.Size))
		}
	case res.Class == pull.ClassCanceled:
		m.pullsTotal.WithLabelValues(resultCanceled, string(res.Class)).Inc()
	default:
		m.pullsTotal.WithLabelValues(resultFailure, string(res.Class)).Inc()
	}
	if !res.RetryAt.IsZero() {
		m.pullBackOffs.WithLabelValues(string(res.Class)).Inc()
	}
}
