package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// What warming saved: the containers the runtime starts from an image
// this agent pulled, fetching its bytes, before the container was created.
// Those starts did not wait for a pull. The agent learns which images it
// brought from its pulls' results (the bytes the content store showed
// them fetch, so containerd only), and lists the runtime's containers
// over CRI (no Kubernetes permission) at most every servedEvery.

// Containers is the part of the CRI runtime service the agent reads to
// count them. *criclient.Client implements it.
type Containers interface {
	ListContainers(ctx context.Context) ([]*runtimeapi.Container, error)
}

// servedEvery bounds how often the containers are listed; passes come at
// least every resync period.
const servedEvery = 10 * time.Second

// servedWindow is the span NodeWarm.status.servedStarts counts over.
const servedWindow = 24 * time.Hour

// maxServedKept bounds the start times kept for the window.
const maxServedKept = 100_000

var (
	startsServed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "warmer_container_starts_warm_total",
		Help: "Containers the runtime started from an image the agent had pulled (fetching its bytes) before the container was created: starts that did not wait for that pull (containerd only).",
	})
	bytesSaved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "warmer_pull_bytes_saved_total",
		Help: "Compressed bytes the agent's pulls had fetched for the images of warm_total's containers: what those starts did not have to pull.",
	})
)

func init() { metrics.Registry.MustRegister(startsServed, bytesSaved) }

// served is what the agent keeps to count the starts warming served.
type served struct {
	// warmed is, by runtime image ID, when the agent's pull brought the
	// image and what it fetched.
	warmed map[string]warmedImage
	// seen holds the containers already looked at, by ID, as of the last
	// listing.
	seen map[string]bool
	// starts are the times of the starts counted within the window.
	starts []time.Time
	listed time.Time
}

type warmedImage struct {
	at      time.Time
	fetched int64
}

// note takes in the pulls that ended: each that fetched bytes brought its
// image.
func (s *served) note(results []pullengine.Result) {
	for _, r := range results {
		if !r.Succeeded() || r.Fetched <= 0 || r.ImageRef == "" {
			continue
		}
		if s.warmed == nil {
			s.warmed = map[string]warmedImage{}
		}
		s.warmed[r.ImageRef] = warmedImage{at: r.Finished, fetched: r.Fetched}
	}
}

// count lists the containers, at most every servedEvery, counts those
// created from an image after the agent's pull brought it, and returns
// how many it counted within the window up to now.
func (s *served) count(ctx context.Context, c Containers, now time.Time) int {
	if c != nil && len(s.warmed) > 0 && now.Sub(s.listed) >= servedEvery {
		s.listed = now
		if cs, err := c.ListContainers(ctx); err != nil {
			log.FromContext(ctx).V(1).Info("Listing the runtime's containers failed; starts served warm not counted this time", "error", err.Error())
		} else {
			s.take(cs, now)
		}
	}
	for len(s.starts) > 0 && now.Sub(s.starts[0]) > servedWindow {
		s.starts = s.starts[1:]
	}
	return len(s.starts)
}

// take looks at each container not seen before.
func (s *served) take(cs []*runtimeapi.Container, now time.Time) {
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		seen[c.GetId()] = true
		if s.seen[c.GetId()] {
			continue
		}
		img, ok := s.warmed[c.GetImageRef()]
		if !ok || !time.Unix(0, c.GetCreatedAt()).After(img.at) {
			continue
		}
		startsServed.Inc()
		bytesSaved.Add(float64(img.fetched))
		if len(s.starts) < maxServedKept {
			s.starts = append(s.starts, now)
		}
	}
	s.seen = seen
}
