package imagewarm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// The ImageWarm status's size budget (api/v1alpha1/limits.go), measured on
// what the fold writes.

// budgetFleet is an ImageWarm of 100 images over n nodes with long cloud
// names. failing says which nodes fail which image (with a message at the
// schema's longest), lacking which images a node has yet to pull; every
// other image is present.
func budgetFleet(n int, failing, lacking func(node, image int) bool) (*warmv1.ImageWarm, *fleet) {
	refs := build.RealisticRefs(warmv1.MaxImagesPerWarm)
	iw := iwNewWarm(1, nil, refs...)
	msg := strings.Repeat("failed to pull and unpack image 'x': failed to resolve reference: unexpected status 401 Unauthorized ", 3)[:warmv1.MaxNodeMessageLength]
	nodes := make([]metav1.PartialObjectMetadata, n)
	reports := make([]warmv1.NodeWarm, n)
	for i := range n {
		name := fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/250, i%250)
		nodes[i] = iwNodeMeta(name)
		imgs := make([]warmv1.NodeImage, len(refs))
		for j, r := range refs {
			switch {
			case failing(i, j):
				imgs[j] = iwFailing(r, warmv1.ImageBackOff, "Unauthorized", msg)
			case lacking(i, j):
				imgs[j] = iwImg(r, warmv1.ImagePulling)
			default:
				imgs[j] = iwWithDigest(iwImg(r, warmv1.ImagePresent), iwDigestA)
			}
		}
		reports[i] = iwReport(name, iwWebAt(1), imgs...)
	}
	return iw, newFleet(nodes, reports)
}

// budgetCases are the statuses measured: settled, and mid-rollout with
// every image lacking somewhere and a node in a hundred failing.
var budgetCases = []struct {
	name             string
	failing, lacking func(node, image int) bool
}{
	{"settled", func(int, int) bool { return false }, func(int, int) bool { return false }},
	{"rolling out, failures", func(node, image int) bool { return node%100 == 0 && image%7 == 0 },
		func(node, image int) bool { return (node+image)%3 == 0 }},
}

func imageWarmStatusBytes(t testing.TB, n int, failing, lacking func(node, image int) bool) int {
	iw, f := budgetFleet(n, failing, lacking)
	st, err := aggregateStatus(iw, f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestImageWarmStatusBudget checks that the status of an ImageWarm of 100
// images stays within ImageWarmStatusBudget on 3 and on 1,000 nodes,
// settled or rolling out with failures listed.
func TestImageWarmStatusBudget(t *testing.T) {
	for _, n := range []int{3, 1000} {
		for _, c := range budgetCases {
			t.Run(fmt.Sprintf("%d nodes, %s", n, c.name), func(t *testing.T) {
				size := imageWarmStatusBytes(t, n, c.failing, c.lacking)
				t.Logf("%d bytes", size)
				if size > warmv1.ImageWarmStatusBudget {
					t.Errorf("the status takes %d bytes, over the %d budget", size, warmv1.ImageWarmStatusBudget)
				}
			})
		}
	}
}

// BenchmarkImageWarmStatusSize reports the bytes the status of an
// ImageWarm of 100 images rolling out with failures takes (make bench's
// "status-B" rows); it measures size, not time.
func BenchmarkImageWarmStatusSize(b *testing.B) {
	c := budgetCases[1]
	for _, n := range []int{3, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var size int
			for b.Loop() {
				size = imageWarmStatusBytes(b, n, c.failing, c.lacking)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(size), "status-B")
		})
	}
}
