package agent

import (
	"context"
	"slices"
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

// maxWarmedKept bounds the images remembered as warmed; past it the one
// warmed longest ago is forgotten.
const maxWarmedKept = 4096

// served is what the agent keeps to count the starts warming served.
type served struct {
	// warmed is, by runtime image ID, when the agent's pull brought the
	// image, what it fetched, and the references the agent pulled it by.
	warmed map[string]*warmedImage
	// seen holds the containers already looked at, by ID, as of the last
	// listing.
	seen map[string]bool
	// starts are the starts counted within the window, oldest first.
	starts []servedStart
	listed time.Time
	// byRef counts starts by reference; rebuilt when starts change.
	byRef map[string]int
	dirty bool
}

type warmedImage struct {
	at      time.Time
	fetched int64
	refs    []string
}

// servedStart is one counted start and the references of its image.
type servedStart struct {
	at   time.Time
	refs []string
}

// note takes in the pulls that ended: each that fetched bytes brought its
// image, and every successful pull of an image so brought adds the
// reference it was asked by (a digest pulled by its tag's pull).
func (s *served) note(results []pullengine.Result) {
	for _, fetching := range [...]bool{true, false} {
		for _, r := range results {
			if !r.Succeeded() || r.ImageRef == "" || (r.Fetched > 0) != fetching {
				continue
			}
			s.noteOne(r)
		}
	}
}

func (s *served) noteOne(r pullengine.Result) {
	w := s.warmed[r.ImageRef]
	switch {
	case r.Fetched > 0 && w == nil:
		if s.warmed == nil {
			s.warmed = map[string]*warmedImage{}
		}
		s.forgetOldest()
		w = &warmedImage{}
		s.warmed[r.ImageRef] = w
	case w == nil:
		return // present before any pull of the agent's fetched it
	}
	if r.Fetched > 0 {
		w.at, w.fetched = r.Finished, r.Fetched
	}
	if !slices.Contains(w.refs, r.Ref) {
		w.refs = append(slices.Clip(w.refs), r.Ref)
	}
}

// forgetOldest makes room for one more warmed image.
func (s *served) forgetOldest() {
	if len(s.warmed) < maxWarmedKept {
		return
	}
	var oldest string
	for id, w := range s.warmed {
		if oldest == "" || w.at.Before(s.warmed[oldest].at) {
			oldest = id
		}
	}
	delete(s.warmed, oldest)
}

// count lists the containers, at most every servedEvery, counts those
// created from an image after the agent's pull brought it, and returns
// how many it counted within the window up to now, in all and by the
// references their images were pulled by. The map is the served's own:
// read it before the next count.
func (s *served) count(ctx context.Context, c Containers, now time.Time) (int, map[string]int) {
	if c != nil && len(s.warmed) > 0 && now.Sub(s.listed) >= servedEvery {
		s.listed = now
		if cs, err := c.ListContainers(ctx); err != nil {
			log.FromContext(ctx).V(1).Info("Listing the runtime's containers failed; starts served warm not counted this time", "error", err.Error())
		} else {
			s.take(cs, now)
		}
	}
	for len(s.starts) > 0 && now.Sub(s.starts[0].at) > servedWindow {
		s.starts = s.starts[1:]
		s.dirty = true
	}
	if s.dirty {
		s.byRef = map[string]int{}
		for _, st := range s.starts {
			for _, ref := range st.refs {
				s.byRef[ref]++
			}
		}
		s.dirty = false
	}
	return len(s.starts), s.byRef
}

// take looks at each container not seen before. A container the kubelet
// restarted (attempt above 0) is not counted: its image was there since
// its first start, warmed or not.
func (s *served) take(cs []*runtimeapi.Container, now time.Time) {
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		seen[c.GetId()] = true
		if s.seen[c.GetId()] || c.GetMetadata().GetAttempt() > 0 {
			continue
		}
		img, ok := s.warmed[c.GetImageRef()]
		if !ok || !time.Unix(0, c.GetCreatedAt()).After(img.at) {
			continue
		}
		startsServed.Inc()
		bytesSaved.Add(float64(img.fetched))
		if len(s.starts) < maxServedKept {
			s.starts = append(s.starts, servedStart{at: now, refs: img.refs})
			s.dirty = true
		}
	}
	s.seen = seen
}
