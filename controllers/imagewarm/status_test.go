package imagewarm

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

const (
	iwDigestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	iwDigestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// newWarm is ImageWarm default/web at generation gen.
func iwNewWarm(gen int64, sel *warmv1.NodeSelector, images ...string) *warmv1.ImageWarm {
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: gen}}
	iw.Spec.NodeSelector = sel
	for _, img := range images {
		iw.Spec.Images = append(iw.Spec.Images, warmv1.ImageReference(img))
	}
	return iw
}

func iwZone(z string) *warmv1.NodeSelector {
	return &warmv1.NodeSelector{MatchLabels: map[string]warmv1.LabelValue{"zone": warmv1.LabelValue(z)}}
}

func iwNodeMeta(name string, kv ...string) metav1.PartialObjectMetadata {
	n := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

// webAt says the node's agent acts on default/web at generation gen.
func iwWebAt(gen int64) []warmv1.WarmRef {
	return []warmv1.WarmRef{{Namespace: "other", Name: "web", Generation: 99}, {Namespace: "default", Name: "web", Generation: gen}}
}

func iwReport(node string, warms []warmv1.WarmRef, images ...warmv1.NodeImage) warmv1.NodeWarm {
	slices.SortFunc(images, func(a, b warmv1.NodeImage) int {
		return cmp.Or(strings.Compare(a.Image, b.Image), strings.Compare(a.SecretsNamespace, b.SecretsNamespace))
	})
	return warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: warmv1.NodeWarmStatus{Warms: warms, Images: images}}
}

// img is a report entry for ref, normalised as the agent does.
func iwImg(ref string, state warmv1.ImageState) warmv1.NodeImage {
	return warmv1.NodeImage{Image: reportKey(ref), State: state}
}

func iwWithDigest(i warmv1.NodeImage, d string) warmv1.NodeImage { i.Digest = d; return i }

// iwScoped is the entry of ns's pull secrets.
func iwScoped(i warmv1.NodeImage, ns string) warmv1.NodeImage { i.SecretsNamespace = ns; return i }

func iwFailing(ref string, state warmv1.ImageState, reason, msg string) warmv1.NodeImage {
	i := iwImg(ref, state)
	i.Reason, i.Message = reason, msg
	return i
}

// iwRetried is i after n failed pulls.
func iwRetried(i warmv1.NodeImage, n int32) warmv1.NodeImage { i.Attempts = n; return i }

type iwWantCond struct {
	status metav1.ConditionStatus
	reason string
}

func TestAggregateStatus(t *testing.T) {
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	longMsg := strings.Repeat("é", 400) // 800 bytes
	cases := []struct {
		name        string
		iw          *warmv1.ImageWarm
		nodes       []metav1.PartialObjectMetadata
		reports     []warmv1.NodeWarm
		counts      warmv1.NodeCounts
		readyImages int32
		images      []warmv1.ImageFleetStatus // the images listed as not done
		failures    []warmv1.NodeFailure      // checked always
		ready       iwWantCond
		progress    iwWantCond
		degraded    iwWantCond
	}{{
		name:     "no matching nodes",
		iw:       iwNewWarm(1, iwZone("a"), "nginx"),
		nodes:    []metav1.PartialObjectMetadata{iwNodeMeta("n1", "zone", "b")},
		reports:  []warmv1.NodeWarm{iwReport("n1", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent))},
		counts:   warmv1.NodeCounts{},
		ready:    iwWantCond{F, warmv1.ReasonNoMatchingNodes},
		progress: iwWantCond{F, warmv1.ReasonNoMatchingNodes},
		degraded: iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:     "no report",
		iw:       iwNewWarm(1, nil, "nginx"),
		nodes:    []metav1.PartialObjectMetadata{iwNodeMeta("n1")},
		counts:   warmv1.NodeCounts{Matching: 1, NotReporting: 1},
		images:   []warmv1.ImageFleetStatus{{Image: "nginx"}},
		ready:    iwWantCond{F, warmv1.ReasonNotReporting},
		progress: iwWantCond{T, warmv1.ReasonNotReporting},
		degraded: iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:     "report does not list the ImageWarm",
		iw:       iwNewWarm(1, nil, "nginx"),
		nodes:    []metav1.PartialObjectMetadata{iwNodeMeta("n1")},
		reports:  []warmv1.NodeWarm{iwReport("n1", []warmv1.WarmRef{{Namespace: "other", Name: "web", Generation: 1}}, iwImg("nginx", warmv1.ImagePresent))},
		counts:   warmv1.NodeCounts{Matching: 1, NotReporting: 1},
		images:   []warmv1.ImageFleetStatus{{Image: "nginx"}},
		ready:    iwWantCond{F, warmv1.ReasonNotReporting},
		progress: iwWantCond{T, warmv1.ReasonNotReporting},
		degraded: iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		// Every node fails; the agent of n2 reported while a retry was
		// under way: still a failed node, with its failure's reason.
		name:  "a retry under way is a failure",
		iw:    iwNewWarm(1, nil, "nginx"),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2")},
		reports: []warmv1.NodeWarm{
			iwReport("n1", iwWebAt(1), iwRetried(iwFailing("nginx", warmv1.ImageBackOff, "Unauthorized", "401"), 3)),
			iwReport("n2", iwWebAt(1), iwRetried(iwFailing("nginx", warmv1.ImagePulling, "Unauthorized", "401"), 3)),
		},
		counts: warmv1.NodeCounts{Matching: 2, Failed: 2},
		images: []warmv1.ImageFleetStatus{{Image: "nginx", Failed: 2}},
		failures: []warmv1.NodeFailure{{Node: "n1", Image: "nginx", Reason: "Unauthorized", Message: "401"},
			{Node: "n2", Image: "nginx", Reason: "Unauthorized", Message: "401"}},
		ready:    iwWantCond{F, warmv1.ReasonNodesFailed},
		progress: iwWantCond{F, warmv1.ReasonNodesFailed},
		degraded: iwWantCond{T, warmv1.ReasonPullFailed},
	}, {
		name:     "stale generation",
		iw:       iwNewWarm(3, nil, "nginx"),
		nodes:    []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2")},
		reports:  []warmv1.NodeWarm{iwReport("n1", iwWebAt(2), iwImg("nginx", warmv1.ImagePresent)), iwReport("n2", iwWebAt(4), iwImg("nginx", warmv1.ImagePresent))},
		counts:   warmv1.NodeCounts{Matching: 2, Ready: 1, NotReporting: 1},
		images:   []warmv1.ImageFleetStatus{{Image: "nginx", Ready: 1}},
		ready:    iwWantCond{F, warmv1.ReasonNotReporting},
		progress: iwWantCond{T, warmv1.ReasonNotReporting},
		degraded: iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:  "ready",
		iw:    iwNewWarm(1, nil, "nginx:1.27", "registry.example:5000/team/app:v1"),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2")},
		reports: []warmv1.NodeWarm{
			iwReport("n1", iwWebAt(1), iwImg("nginx:1.27", warmv1.ImagePresent), iwImg("registry.example:5000/team/app:v1", warmv1.ImagePresent), iwImg("redis", warmv1.ImageFailed)),
			iwReport("n2", iwWebAt(1), iwImg("nginx:1.27", warmv1.ImagePresent), iwImg("registry.example:5000/team/app:v1", warmv1.ImagePresent)),
		},
		counts:      warmv1.NodeCounts{Matching: 2, Ready: 2},
		readyImages: 2,
		ready:       iwWantCond{T, warmv1.ReasonAllNodesWarm},
		progress:    iwWantCond{F, warmv1.ReasonAllNodesWarm},
		degraded:    iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		// One image, three entries: node-wide (present), another
		// namespace's (present) and default's own (refused): default/web
		// is judged by its own namespace's entry alone.
		name:  "an entry per namespace's credentials",
		iw:    iwNewWarm(1, nil, "nginx:1.27"),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2")},
		reports: []warmv1.NodeWarm{
			iwReport("n1", iwWebAt(1), iwImg("nginx:1.27", warmv1.ImagePresent), iwScoped(iwImg("nginx:1.27", warmv1.ImagePresent), "other"),
				iwScoped(iwFailing("nginx:1.27", warmv1.ImageBackOff, "Unauthorized", "401"), "default")),
			// Only the node-wide entry and another namespace's: default/web
			// names no secret here, the node-wide one is its.
			iwReport("n2", iwWebAt(1), iwImg("nginx:1.27", warmv1.ImagePresent), iwScoped(iwFailing("nginx:1.27", warmv1.ImageBackOff, "Unauthorized", "401"), "other")),
		},
		counts:      warmv1.NodeCounts{Matching: 2, Ready: 1, Failed: 1},
		readyImages: 0,
		images:      []warmv1.ImageFleetStatus{{Image: "nginx:1.27", Ready: 1, Failed: 1}},
		failures:    []warmv1.NodeFailure{{Node: "n1", Image: "nginx:1.27", Reason: "Unauthorized", Message: "401"}},
		ready:       iwWantCond{F, warmv1.ReasonNodesFailed},
		progress:    iwWantCond{F, warmv1.ReasonNodesFailed},
		degraded:    iwWantCond{T, warmv1.ReasonPullFailed},
	}, {
		name:  "pulling, queued and not yet listed",
		iw:    iwNewWarm(1, nil, "nginx", "redis", "busybox"),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2")},
		reports: []warmv1.NodeWarm{
			iwReport("n1", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent), iwImg("redis", warmv1.ImagePulling), iwImg("busybox", warmv1.ImageQueued)),
			iwReport("n2", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent), iwImg("redis", warmv1.ImagePresent)),
		},
		counts:      warmv1.NodeCounts{Matching: 2, Pulling: 2},
		readyImages: 1,
		images:      []warmv1.ImageFleetStatus{{Image: "redis", Ready: 1, Pulling: 1}, {Image: "busybox", Pulling: 2}},
		ready:       iwWantCond{F, warmv1.ReasonPulling},
		progress:    iwWantCond{T, warmv1.ReasonPulling},
		degraded:    iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:  "failed and backing off",
		iw:    iwNewWarm(1, nil, "nginx", "redis"),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2")},
		reports: []warmv1.NodeWarm{
			iwReport("n1", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent), iwFailing("redis", warmv1.ImageBackOff, "Unauthorized", "401")),
			iwReport("n2", iwWebAt(1), iwFailing("nginx", warmv1.ImageFailed, "", "bad"), iwImg("redis", warmv1.ImagePulling)),
		},
		counts: warmv1.NodeCounts{Matching: 2, Failed: 2},
		images: []warmv1.ImageFleetStatus{{Image: "nginx", Ready: 1, Failed: 1}, {Image: "redis", Failed: 1, Pulling: 1}},
		failures: []warmv1.NodeFailure{
			{Node: "n1", Image: "redis", Reason: "Unauthorized", Message: "401"},
			{Node: "n2", Image: "nginx", Reason: "Failed", Message: "bad"},
		},
		ready:    iwWantCond{F, warmv1.ReasonNodesFailed},
		progress: iwWantCond{F, warmv1.ReasonNodesFailed},
		degraded: iwWantCond{T, warmv1.ReasonPullFailed},
	}, {
		name:  "mixed",
		iw:    iwNewWarm(1, nil, "nginx"),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("d"), iwNodeMeta("c"), iwNodeMeta("b"), iwNodeMeta("a")},
		reports: []warmv1.NodeWarm{
			iwReport("a", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent)),
			iwReport("b", iwWebAt(1), iwImg("nginx", warmv1.ImagePulling)),
			iwReport("c", iwWebAt(1), iwFailing("nginx", warmv1.ImageBackOff, "NotFound", "manifest unknown")),
		},
		counts:   warmv1.NodeCounts{Matching: 4, Ready: 1, Pulling: 1, Failed: 1, NotReporting: 1},
		images:   []warmv1.ImageFleetStatus{{Image: "nginx", Ready: 1, Pulling: 1, Failed: 1}},
		failures: []warmv1.NodeFailure{{Node: "c", Image: "nginx", Reason: "NotFound", Message: "manifest unknown"}},
		ready:    iwWantCond{F, warmv1.ReasonNodesFailed},
		progress: iwWantCond{T, warmv1.ReasonPulling},
		degraded: iwWantCond{T, warmv1.ReasonPullFailed},
	}, {
		name:  "digests agree, or not",
		iw:    iwNewWarm(1, nil, "nginx", "redis", "busybox"),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2"), iwNodeMeta("n3")},
		reports: []warmv1.NodeWarm{
			iwReport("n1", iwWebAt(1), iwWithDigest(iwImg("nginx", warmv1.ImagePresent), iwDigestA), iwWithDigest(iwImg("redis", warmv1.ImagePresent), iwDigestA), iwImg("busybox", warmv1.ImagePresent)),
			iwReport("n2", iwWebAt(1), iwWithDigest(iwImg("nginx", warmv1.ImagePresent), iwDigestA), iwWithDigest(iwImg("redis", warmv1.ImagePresent), iwDigestB), iwWithDigest(iwImg("busybox", warmv1.ImagePulling), iwDigestB)),
			// A node without a repository digest does not split the vote.
			iwReport("n3", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent), iwWithDigest(iwImg("redis", warmv1.ImagePresent), iwDigestA), iwWithDigest(iwImg("busybox", warmv1.ImagePresent), iwDigestA)),
		},
		counts:      warmv1.NodeCounts{Matching: 3, Ready: 2, Pulling: 1},
		readyImages: 2,
		images:      []warmv1.ImageFleetStatus{{Image: "redis", Ready: 3, DigestsDiffer: true}, {Image: "busybox", Ready: 2, Pulling: 1}},
		ready:       iwWantCond{F, warmv1.ReasonPulling},
		progress:    iwWantCond{T, warmv1.ReasonPulling},
		degraded:    iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:  "suspended",
		iw:    iwSuspend(iwNewWarm(1, nil, "nginx")),
		nodes: []metav1.PartialObjectMetadata{iwNodeMeta("n1"), iwNodeMeta("n2")},
		reports: []warmv1.NodeWarm{
			iwReport("n1", iwWebAt(1), iwImg("nginx", warmv1.ImageSkipped)),
			iwReport("n2", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent)),
		},
		counts:   warmv1.NodeCounts{Matching: 2, Ready: 1, Pulling: 1},
		images:   []warmv1.ImageFleetStatus{{Image: "nginx", Ready: 1, Pulling: 1}},
		ready:    iwWantCond{F, warmv1.ReasonSuspended},
		progress: iwWantCond{F, warmv1.ReasonSuspended},
		degraded: iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:        "suspended with every image present",
		iw:          iwSuspend(iwNewWarm(1, nil, "nginx")),
		nodes:       []metav1.PartialObjectMetadata{iwNodeMeta("n1")},
		reports:     []warmv1.NodeWarm{iwReport("n1", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent))},
		counts:      warmv1.NodeCounts{Matching: 1, Ready: 1},
		readyImages: 1,
		ready:       iwWantCond{T, warmv1.ReasonAllNodesWarm},
		progress:    iwWantCond{F, warmv1.ReasonSuspended},
		degraded:    iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name: "selector expressions",
		iw: iwNewWarm(1, &warmv1.NodeSelector{
			MatchLabels: map[string]warmv1.LabelValue{"pool": "web"},
			MatchExpressions: []warmv1.NodeSelectorRequirement{
				{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
				{Key: "gpu", Operator: metav1.LabelSelectorOpDoesNotExist},
			},
		}, "nginx"),
		nodes: []metav1.PartialObjectMetadata{
			iwNodeMeta("match-a", "pool", "web", "zone", "a"),
			iwNodeMeta("match-b", "pool", "web", "zone", "b"),
			iwNodeMeta("zone-c", "pool", "web", "zone", "c"),
			iwNodeMeta("gpu", "pool", "web", "zone", "a", "gpu", "yes"),
			iwNodeMeta("no-pool", "zone", "a"),
		},
		reports: []warmv1.NodeWarm{
			iwReport("match-a", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent)),
			iwReport("zone-c", iwWebAt(1), iwImg("nginx", warmv1.ImageFailed)),
			iwReport("gpu", iwWebAt(1), iwImg("nginx", warmv1.ImageFailed)),
		},
		counts:   warmv1.NodeCounts{Matching: 2, Ready: 1, NotReporting: 1},
		images:   []warmv1.ImageFleetStatus{{Image: "nginx", Ready: 1}},
		ready:    iwWantCond{F, warmv1.ReasonNotReporting},
		progress: iwWantCond{T, warmv1.ReasonNotReporting},
		degraded: iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:        "spec images that normalise alike",
		iw:          iwNewWarm(1, nil, "nginx", "docker.io/library/nginx:latest", "registry.example/app@"+iwDigestA),
		nodes:       []metav1.PartialObjectMetadata{iwNodeMeta("n1")},
		reports:     []warmv1.NodeWarm{iwReport("n1", iwWebAt(1), iwImg("library/nginx:latest", warmv1.ImagePresent), iwWithDigest(iwImg("registry.example/app@"+iwDigestA, warmv1.ImagePresent), iwDigestA))},
		counts:      warmv1.NodeCounts{Matching: 1, Ready: 1},
		readyImages: 3,
		ready:       iwWantCond{T, warmv1.ReasonAllNodesWarm},
		progress:    iwWantCond{F, warmv1.ReasonAllNodesWarm},
		degraded:    iwWantCond{F, warmv1.ReasonNoFailures},
	}, {
		name:     "long message is cut on a rune boundary",
		iw:       iwNewWarm(1, nil, "nginx"),
		nodes:    []metav1.PartialObjectMetadata{iwNodeMeta("n1")},
		reports:  []warmv1.NodeWarm{iwReport("n1", iwWebAt(1), iwFailing("nginx", warmv1.ImageBackOff, "ErrImagePull", "x"+longMsg))},
		counts:   warmv1.NodeCounts{Matching: 1, Failed: 1},
		images:   []warmv1.ImageFleetStatus{{Image: "nginx", Failed: 1}},
		failures: []warmv1.NodeFailure{{Node: "n1", Image: "nginx", Reason: "ErrImagePull", Message: ("x" + longMsg)[:warmv1.MaxMessageLength-3] + "…"}},
		ready:    iwWantCond{F, warmv1.ReasonNodesFailed},
		progress: iwWantCond{F, warmv1.ReasonNodesFailed},
		degraded: iwWantCond{T, warmv1.ReasonPullFailed},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig := c.iw.DeepCopy()
			st, err := aggregateStatus(c.iw, newFleet(c.nodes, c.reports))
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(c.iw, orig) {
				t.Error("aggregateStatus changed the ImageWarm")
			}
			if st.ObservedGeneration != c.iw.Generation || st.ImageCount != int32(len(c.iw.Spec.Images)) {
				t.Errorf("observedGeneration %d imageCount %d", st.ObservedGeneration, st.ImageCount)
			}
			if st.Nodes != c.counts {
				t.Errorf("nodes = %+v, want %+v", st.Nodes, c.counts)
			}
			if st.ReadyImages != c.readyImages || !slices.Equal(st.Images, c.images) {
				t.Errorf("readyImages %d, images =\n%+v\nwant %d,\n%+v", st.ReadyImages, st.Images, c.readyImages, c.images)
			}
			if !slices.Equal(st.Failures, c.failures) {
				t.Errorf("failures =\n%+v\nwant\n%+v", st.Failures, c.failures)
			}
			iwCheckCondition(t, st, warmv1.ConditionReady, c.ready, c.iw.Generation)
			iwCheckCondition(t, st, warmv1.ConditionProgressing, c.progress, c.iw.Generation)
			iwCheckCondition(t, st, warmv1.ConditionDegraded, c.degraded, c.iw.Generation)
		})
	}
}

func iwSuspend(iw *warmv1.ImageWarm) *warmv1.ImageWarm { iw.Spec.Suspend = true; return iw }

func iwCheckCondition(t *testing.T, st warmv1.ImageWarmStatus, typ string, want iwWantCond, gen int64) {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, typ)
	switch {
	case c == nil:
		t.Errorf("no %s condition", typ)
	case c.Status != want.status || c.Reason != want.reason:
		t.Errorf("%s = %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, want.status, want.reason)
	case c.ObservedGeneration != gen || c.Message == "" || c.LastTransitionTime.IsZero():
		t.Errorf("%s incomplete: %+v", typ, c)
	}
}

// TestAggregateFailuresCapAndOrder checks that the same first failures, by
// node then spec order, are reported whatever order the cache lists in.
func TestAggregateFailuresCapAndOrder(t *testing.T) {
	iw := iwNewWarm(1, nil, "redis", "nginx")
	var nodes []metav1.PartialObjectMetadata
	var reports []warmv1.NodeWarm
	for i := range 25 {
		name := fmt.Sprintf("node-%02d", i)
		nodes = append(nodes, iwNodeMeta(name))
		reports = append(reports, iwReport(name, iwWebAt(1),
			iwFailing("nginx", warmv1.ImageBackOff, "NotFound", name),
			iwFailing("redis", warmv1.ImageFailed, "Unauthorized", name)))
	}
	var want []warmv1.NodeFailure
	for i := range 5 {
		name := fmt.Sprintf("node-%02d", i)
		want = append(want,
			warmv1.NodeFailure{Node: name, Image: "redis", Reason: "Unauthorized", Message: name},
			warmv1.NodeFailure{Node: name, Image: "nginx", Reason: "NotFound", Message: name})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		rng.Shuffle(len(reports), func(i, j int) { reports[i], reports[j] = reports[j], reports[i] })
		st, err := aggregateStatus(iw, newFleet(nodes, reports))
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Failures) != warmv1.MaxReportedFailures {
			t.Fatalf("%d failures reported, want %d", len(st.Failures), warmv1.MaxReportedFailures)
		}
		if !slices.Equal(st.Failures, want) {
			t.Fatalf("failures =\n%+v\nwant\n%+v", st.Failures, want)
		}
		if st.Nodes.Failed != 25 {
			t.Fatalf("failed = %d, want 25", st.Nodes.Failed)
		}
	}
}

// TestAggregateIsStable checks that folding the same reports into the status
// the last fold produced changes nothing, transition times included, which
// is what lets the controller skip the write.
func TestAggregateIsStable(t *testing.T) {
	iw := iwNewWarm(1, nil, "nginx")
	f := newFleet([]metav1.PartialObjectMetadata{iwNodeMeta("n1")}, []warmv1.NodeWarm{iwReport("n1", iwWebAt(1), iwImg("nginx", warmv1.ImagePulling))})
	first, err := aggregateStatus(iw, f)
	if err != nil {
		t.Fatal(err)
	}
	iw.Status = first
	time.Sleep(10 * time.Millisecond)
	second, err := aggregateStatus(iw, f)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(first, second) {
		t.Errorf("status changed without a change in the reports:\n%+v\n%+v", first, second)
	}
}

// BenchmarkAggregate1000 folds 1,000 nodes' reports, 40 images each, into
// the status of an ImageWarm of 10 images that selects half of them.
func BenchmarkAggregate1000(b *testing.B) {
	const nodeCount, imagesPerWarm, imagesPerNode = 1000, 10, 40
	var spec []string
	for i := range imagesPerWarm {
		spec = append(spec, fmt.Sprintf("registry.example:5000/team/app-%d:v1", i))
	}
	iw := iwNewWarm(1, iwZone("a"), spec...)
	nodes := make([]metav1.PartialObjectMetadata, nodeCount)
	reports := make([]warmv1.NodeWarm, nodeCount)
	states := []warmv1.ImageState{warmv1.ImagePresent, warmv1.ImagePresent, warmv1.ImagePresent, warmv1.ImagePulling, warmv1.ImageBackOff}
	for n := range nodeCount {
		name := fmt.Sprintf("node-%04d", n)
		nodes[n] = iwNodeMeta(name, "zone", []string{"a", "b"}[n%2], "kubernetes.io/hostname", name)
		var imgs []warmv1.NodeImage
		for i := range imagesPerNode {
			ref := fmt.Sprintf("registry.example:5000/team/app-%d:v1", i)
			e := iwWithDigest(iwImg(ref, states[(n+i)%len(states)]), iwDigestA)
			if e.State == warmv1.ImageBackOff {
				e.Reason, e.Message = "RegistryUnavailable", "dial tcp: connection refused"
			}
			imgs = append(imgs, e)
		}
		warms := []warmv1.WarmRef{{Namespace: "a", Name: "x", Generation: 1}, {Namespace: "default", Name: "web", Generation: 1}, {Namespace: "z", Name: "y", Generation: 1}}
		reports[n] = iwReport(name, warms, imgs...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st, err := aggregateStatus(iw, newFleet(nodes, reports))
		if err != nil || st.Nodes.Matching != nodeCount/2 {
			b.Fatalf("matching %d, %v", st.Nodes.Matching, err)
		}
	}
}

// TestAggregateUnlistedImages reads the report of a node that wants more
// images than a NodeWarm lists: an image it leaves out counts as unlisted
// there, with a reason, neither failed nor pulling.
func TestAggregateUnlistedImages(t *testing.T) {
	iw := iwNewWarm(1, nil, "nginx", "redis")
	cut := iwReport("node-a", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent))
	cut.Status.Desired = 600
	cut.Status.Conditions = []metav1.Condition{{Type: warmv1.ConditionImagesListed, Status: metav1.ConditionFalse, Reason: warmv1.ReasonTooManyImages}}
	whole := iwReport("node-b", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent))
	st, err := aggregateStatus(iw, newFleet([]metav1.PartialObjectMetadata{iwNodeMeta("node-a"), iwNodeMeta("node-b")}, []warmv1.NodeWarm{cut, whole}))
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes.Unlisted != 1 || st.Nodes.Failed != 0 || st.Nodes.Pulling != 1 {
		t.Errorf("nodes %+v, want node-a unlisted and node-b pulling (redis not taken in yet)", st.Nodes)
	}
	if len(st.Failures) != 0 {
		t.Errorf("failures %+v, want none: an image left out of a report is not a failure", st.Failures)
	}
	if len(st.Images) != 1 || st.Images[0].Image != "redis" || st.Images[0].Unlisted != 1 {
		t.Errorf("images %+v, want redis unlisted on one node", st.Images)
	}
	st.Nodes.Pulling = 0 // node-b done: what is left is node-a's unlisted image
	setReady(&st, iw)
	setProgressing(&st, iw)
	for _, typ := range []string{warmv1.ConditionReady, warmv1.ConditionProgressing} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Reason != warmv1.ReasonImagesNotListed {
			t.Errorf("%s = %+v, want reason %s", typ, c, warmv1.ReasonImagesNotListed)
		}
	}
}

// TestAggregateControlPlane checks that the controller counts a
// control-plane node as matching only an ImageWarm whose selector names
// its role, as the agent there decides (warmv1.AsNodeSelector): otherwise
// the node, whose agent reports nothing of the ImageWarm, would count as
// not reporting for good.
func TestAggregateControlPlane(t *testing.T) {
	nodes := []metav1.PartialObjectMetadata{iwNodeMeta("worker"), iwNodeMeta("cp", "node-role.kubernetes.io/control-plane", "")}
	reports := []warmv1.NodeWarm{iwReport("worker", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent)), iwReport("cp", nil)}
	st, err := aggregateStatus(iwNewWarm(1, nil, "nginx"), newFleet(nodes, reports))
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes.Matching != 1 || st.Nodes.Ready != 1 || st.Nodes.NotReporting != 0 {
		t.Errorf("no selector: nodes %+v, want the worker alone, ready", st.Nodes)
	}
	named := iwNewWarm(1, &warmv1.NodeSelector{MatchLabels: map[string]warmv1.LabelValue{"node-role.kubernetes.io/control-plane": ""}}, "nginx")
	reports[1] = iwReport("cp", iwWebAt(1), iwImg("nginx", warmv1.ImagePresent))
	if st, err = aggregateStatus(named, newFleet(nodes, reports)); err != nil {
		t.Fatal(err)
	}
	if st.Nodes.Matching != 1 || st.Nodes.Ready != 1 {
		t.Errorf("control-plane selector: nodes %+v, want the control-plane node alone, ready", st.Nodes)
	}
}

// TestAggregateWarmLeftOut reads the report of a node that matches more
// ImageWarms than a NodeWarm lists and left this one out: the node counts
// as unlisted, with every image, and the conditions say why, rather than
// as not reporting for good. A report that leaves it out without saying
// so is not on it yet: not reporting.
func TestAggregateWarmLeftOut(t *testing.T) {
	iw := iwNewWarm(1, nil, "nginx", "redis")
	cut := iwReport("node-a", []warmv1.WarmRef{{Namespace: "aaa", Name: "w000", Generation: 1}}, iwImg("nginx", warmv1.ImagePresent))
	cut.Status.Conditions = []metav1.Condition{{Type: warmv1.ConditionWarmsListed, Status: metav1.ConditionFalse, Reason: warmv1.ReasonTooManyImageWarms}}
	behind := iwReport("node-b", []warmv1.WarmRef{{Namespace: "aaa", Name: "w000", Generation: 1}}, iwImg("nginx", warmv1.ImagePresent))
	st, err := aggregateStatus(iw, newFleet([]metav1.PartialObjectMetadata{iwNodeMeta("node-a"), iwNodeMeta("node-b")}, []warmv1.NodeWarm{cut, behind}))
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes.Unlisted != 1 || st.Nodes.NotReporting != 1 || st.Nodes.Failed != 0 || st.Nodes.Ready != 0 {
		t.Errorf("nodes %+v, want node-a unlisted and node-b not reporting", st.Nodes)
	}
	if len(st.Images) != 2 || st.Images[0].Unlisted != 1 || st.Images[1].Unlisted != 1 {
		t.Errorf("images %+v, want both unlisted on one node", st.Images)
	}
	st.Nodes.NotReporting = 0 // node-b caught up and ready: what is left is node-a
	st.Nodes.Ready = 1
	setReady(&st, iw)
	setProgressing(&st, iw)
	for _, typ := range []string{warmv1.ConditionReady, warmv1.ConditionProgressing} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Reason != warmv1.ReasonImagesNotListed || !strings.Contains(c.Message, "ImageWarms") {
			t.Errorf("%s = %+v, want reason %s naming ImageWarms", typ, c, warmv1.ReasonImagesNotListed)
		}
	}
}
