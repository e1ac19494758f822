package imagewarm

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// pulling is a Pulling entry with progress; left < 0: no time left known.
func pulling(ref string, done, total, left int64) warmv1.NodeImage {
	e := iwImg(ref, warmv1.ImagePulling)
	e.Progress = &warmv1.PullProgress{BytesDone: done, BytesTotal: total}
	if left >= 0 {
		e.Progress.SecondsLeft = ptr.To(left)
	}
	return e
}

// TestAggregatePullProgress sums the bytes of the ImageWarm's own images
// over the nodes pulling them, each image once per node however often the
// spec names it, and names the node with the longest time left and its
// phase (every byte in: unpacking); another ImageWarm's image and a node
// without progress do not count.
func TestAggregatePullProgress(t *testing.T) {
	iw := iwNewWarm(1, nil, "nginx", "docker.io/library/nginx:latest", "redis")
	reports := []warmv1.NodeWarm{
		iwReport("node-a", iwWebAt(1), pulling("nginx", 10, 100, 30), pulling("redis", 5, 50, 90), pulling("other", 1, 1000, 999)),
		iwReport("node-b", iwWebAt(1), pulling("nginx", 100, 100, 120), iwImg("redis", warmv1.ImagePresent)),
		iwReport("node-c", iwWebAt(1), iwImg("nginx", warmv1.ImagePulling), iwImg("redis", warmv1.ImageQueued)),
	}
	nodes := []metav1.PartialObjectMetadata{iwNodeMeta("node-a"), iwNodeMeta("node-b"), iwNodeMeta("node-c")}
	st, err := aggregateStatus(iw, newFleet(nodes, reports))
	if err != nil {
		t.Fatal(err)
	}
	want := warmv1.FleetPullProgress{Nodes: 2, BytesDone: 115, BytesTotal: 250, SlowestNode: "node-b", SlowestSecondsLeft: ptr.To[int64](120), SlowestPhase: warmv1.PullPhaseUnpacking}
	if p := st.PullProgress; p == nil || p.Nodes != want.Nodes || p.BytesDone != want.BytesDone || p.BytesTotal != want.BytesTotal ||
		p.SlowestNode != want.SlowestNode || p.SlowestSecondsLeft == nil || *p.SlowestSecondsLeft != 120 || p.SlowestPhase != want.SlowestPhase {
		t.Errorf("pullProgress %+v, want %+v", p, want)
	}

	// Without a time left anywhere, the most bytes left decide.
	reports[0] = iwReport("node-a", iwWebAt(1), pulling("nginx", 10, 100, -1))
	reports[1] = iwReport("node-b", iwWebAt(1), pulling("nginx", 60, 100, -1))
	st, _ = aggregateStatus(iw, newFleet(nodes, reports))
	if p := st.PullProgress; p == nil || p.SlowestNode != "node-a" || p.SlowestSecondsLeft != nil {
		t.Errorf("pullProgress %+v, want node-a slowest with no time", p)
	}

	// Nothing under way with progress: no field.
	reports[0] = iwReport("node-a", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent))
	reports[1] = iwReport("node-b", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent))
	st, _ = aggregateStatus(iw, newFleet(nodes, reports))
	if st.PullProgress != nil {
		t.Errorf("pullProgress %+v with nothing pulling", st.PullProgress)
	}
}

// TestAggregateServedStarts sums the starts the matching nodes' agents
// count for this ImageWarm (its entry in their warms), whatever
// generation they act on; another ImageWarm's count and a node the
// selector does not match do not count.
func TestAggregateServedStarts(t *testing.T) {
	iw := iwNewWarm(2, nil, "nginx")
	served := func(gen int64, n int32) []warmv1.WarmRef {
		w := iwWebAt(gen)
		for i := range w {
			w[i].ServedStarts = n * int32(i+1) // the other ImageWarm's first
		}
		return w
	}
	reports := []warmv1.NodeWarm{
		iwReport("node-a", served(2, 3), iwImg("nginx", warmv1.ImagePresent)),
		iwReport("node-b", served(1, 4), iwImg("nginx", warmv1.ImagePresent)),
		iwReport("node-x", served(2, 100), iwImg("nginx", warmv1.ImagePresent)),
	}
	nodes := []metav1.PartialObjectMetadata{iwNodeMeta("node-a"), iwNodeMeta("node-b")}
	st, err := aggregateStatus(iw, newFleet(nodes, reports))
	if err != nil {
		t.Fatal(err)
	}
	if st.ServedStarts != 14 {
		t.Errorf("servedStarts %d, want 6 + 8 from the two matching nodes' entries of this ImageWarm", st.ServedStarts)
	}
}
